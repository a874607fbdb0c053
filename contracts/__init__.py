"""specdec's versioned event contracts and the campaign file model. No I/O here.

The names below load on first use (PEP 562): importing any contract module
runs this file first, and `contracts.envelope` builds pydantic models, which a
plain table such as `contracts.steps` or `contracts.inputs` (read when the
`specdec` parser is built) must not pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contracts.envelope import ArtifactRef, Event, RunId, Sha256
    from contracts.registry import ContractError, InvalidEvent, Registry, UnknownEvent, default_registry

# name -> the module that defines it
_EXPORTS = {
    "ArtifactRef": "contracts.envelope",
    "Event": "contracts.envelope",
    "RunId": "contracts.envelope",
    "Sha256": "contracts.envelope",
    "ContractError": "contracts.registry",
    "InvalidEvent": "contracts.registry",
    "Registry": "contracts.registry",
    "UnknownEvent": "contracts.registry",
    "default_registry": "contracts.registry",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'contracts' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
