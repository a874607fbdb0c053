"""Event registry: (schema, version) -> model, with upcasting from older versions.

Reading an event: the raw JSON names its schema and version. A current version
validates directly; an older one is upcast step by step (v1 -> v2 -> ...) by
registered pure functions, then validated; anything else is rejected with an
`UnknownEvent` or `InvalidEvent` that the runtime sends to the dead-letter
stream with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson
from pydantic import ValidationError

from contracts.envelope import Event
from contracts.errors import SpecdecError

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


class ContractError(SpecdecError):
    """Root of every contract error: the payload is not a valid specdec event."""


class InvalidEvent(ContractError):
    """The payload is not JSON, not an object, or fails its model's validation."""


class UnknownEvent(ContractError):
    """The payload names a schema or version this code does not know."""


class Registry:
    """Knows every current event model and how to upcast older versions."""

    def __init__(self, models: Iterable[type[Event]] = ()) -> None:
        self._current: dict[str, type[Event]] = {}
        self._upcasters: dict[tuple[str, int], Upcaster] = {}
        for model in models:
            self.register(model)

    def register(self, model: type[Event]) -> None:
        if model.SCHEMA in self._current:
            raise ValueError(f"{model.SCHEMA} registered twice")
        self._current[model.SCHEMA] = model

    def register_upcaster(self, schema: str, from_version: int, upcast: Upcaster) -> None:
        """`upcast` turns a v`from_version` payload into a v`from_version + 1` payload."""
        self._upcasters[(schema, from_version)] = upcast

    def model(self, schema: str) -> type[Event]:
        try:
            return self._current[schema]
        except KeyError:
            raise UnknownEvent(f"unknown event schema {schema!r}") from None

    @property
    def schemas(self) -> list[str]:
        return list(self._current)

    def parse(self, raw: bytes | str | dict[str, Any]) -> Event:
        """Validate a raw event, upcasting an older version to the current one."""
        if isinstance(raw, dict):
            data = dict(raw)
        else:
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise InvalidEvent(f"payload is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidEvent(f"payload is a JSON {type(data).__name__}, not an object")
        schema, version = data.get("schema"), data.get("version")
        if not isinstance(schema, str) or not isinstance(version, int) or isinstance(version, bool):
            raise InvalidEvent("payload lacks a string `schema` and an integer `version`")
        model = self.model(schema)
        if version > model.VERSION or version < 1:
            raise UnknownEvent(
                f"{schema} v{version} is unknown here (this code reads v1..v{model.VERSION}); "
                "upgrade the consumer or publish a known version"
            )
        while version < model.VERSION:
            upcast = self._upcasters.get((schema, version))
            if upcast is None:
                raise UnknownEvent(f"{schema} v{version} has no upcaster to v{version + 1}")
            data = upcast(dict(data))
            version += 1
            data["version"] = version
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise InvalidEvent(f"{schema} v{version} is invalid: {_brief(exc)}") from None


def _brief(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:8]:
        where = ".".join(str(p) for p in error["loc"]) or "(event)"
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def default_registry() -> Registry:
    from contracts.events import ALL_EVENTS

    return Registry(ALL_EVENTS)
