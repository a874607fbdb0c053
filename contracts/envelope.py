"""The envelope every event on a specdec stream derives from.

An event is one strict pydantic model: the envelope fields below plus the
fields of its payload. `schema` and `version` name the model; the pair is the
key of the registry (see `contracts.registry`).
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

# A run ID is also the experiment ID, the campaign ID, a path component of the
# bundle, a Slurm job-name part and a Kubernetes label value: the pattern is the
# intersection of what all of them accept (lowercase, digits and '-', <= 63).
RUN_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$"
RUN_ID_RE = re.compile(RUN_ID_PATTERN)
SHA256_PATTERN = r"^[0-9a-f]{64}$"
# Step keys and cell IDs become path components too; no '/', no '..'.
KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
KEY_RE = re.compile(KEY_PATTERN)

RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]
Sha256 = Annotated[str, StringConstraints(pattern=SHA256_PATTERN)]
Key = Annotated[str, StringConstraints(pattern=KEY_PATTERN)]


E = TypeVar("E", bound="Event")


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_event_id() -> str:
    return uuid.uuid4().hex


class Strict(BaseModel):
    """Base of every contract model: unknown fields are errors, not ignored."""

    model_config = ConfigDict(
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class ArtifactRef(Strict):
    """A reference to one write-once artifact of a run's evidence bundle."""

    uri: str = Field(
        description="bundle://<run_id>/<relative path> of the artifact inside the run's evidence bundle."
    )
    sha256: Sha256 = Field(description="Hex sha256 of the artifact's bytes, as written once.")
    size_bytes: int = Field(ge=0, description="Size of the artifact in bytes.")


class Event(Strict):
    """Envelope fields shared by every event; subclasses add their payload.

    Subclasses set the class variables `SCHEMA` and `VERSION`; the `schema` and
    `version` fields then default to them and accept nothing else.
    """

    SCHEMA: ClassVar[str] = ""
    VERSION: ClassVar[int] = 0

    if TYPE_CHECKING:
        # Type checkers see defaults: _pin_schema_and_version fills both from the class, so a constructor
        # call need not name them. At run time both stay required fields of the schema (the else branch).
        schema_: str = Field(default="", alias="schema")
        version: int = Field(default=0)
    else:
        schema_: str = Field(alias="schema", description="Event name, e.g. profile.completed.")
        version: int = Field(description="Integer version of this event's schema.")
    run_id: RunId = Field(
        description="Join key: one run ID is also the experiment, campaign and scheduler label."
    )
    event_id: str = Field(
        default_factory=new_event_id,
        min_length=8,
        max_length=64,
        description="Unique per event; with run_id it is the idempotency key of a delivery.",
    )
    causation_id: str | None = Field(
        default=None, description="event_id of the event this one reacts to; None for an operator's event."
    )
    produced_at: datetime = Field(default_factory=utc_now, description="UTC time the event was produced.")
    producer: str = Field(description="Service and instance that produced the event, e.g. profiler/host-1234.")

    @model_validator(mode="before")
    @classmethod
    def _pin_schema_and_version(cls, data: Any) -> Any:
        # schema/version belong to the class: default them from it, and refuse a
        # payload that names another schema or version (that is another model).
        if not cls.SCHEMA or not isinstance(data, dict):
            return data
        data = dict(data)
        schema = data.pop("schema_", None) or data.get("schema") or cls.SCHEMA
        version = data.get("version", cls.VERSION)
        if schema != cls.SCHEMA or version != cls.VERSION:
            raise ValueError(f"{cls.__name__} is {cls.SCHEMA} v{cls.VERSION}, not {schema} v{version}")
        data["schema"] = schema
        data["version"] = version
        return data

    def to_json(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()

    def caused(self, model: type[E], *, producer: str, **payload: Any) -> E:
        """Build the event that reacts to this one: same run, causation set."""
        return model(run_id=self.run_id, causation_id=self.event_id, producer=producer, **payload)
