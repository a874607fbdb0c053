"""specdec's versioned event contracts and the campaign file model. No I/O here."""

from contracts.envelope import ArtifactRef, Event, RunId, Sha256
from contracts.registry import ContractError, InvalidEvent, Registry, UnknownEvent, default_registry

__all__ = [
    "ArtifactRef",
    "ContractError",
    "Event",
    "InvalidEvent",
    "Registry",
    "RunId",
    "Sha256",
    "UnknownEvent",
    "default_registry",
]
