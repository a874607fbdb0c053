"""How a checker changes one value of a campaign (as raw YAML data, before submit).

An edit is `edit(data, ctx)`: it changes `data` in place. `put` walks a dotted
path (`matrix.cells.1.serving.dtype`; `*` is every item of a list) and raises
`NotHere` when the path leads through a value that holds no fields under this
variant (`commands.serve` is `builtin`, `standing` is null): the field is then
absent from the variant, which the guard records as such rather than as a
field that changed nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Edit = Callable[[dict, Any], None]


class NotHere(Exception):
    """The field does not exist under this variant (its container is a plain value)."""


def _step(target: Any, key: str, *, create: bool) -> Any:
    if isinstance(target, list):
        return target[int(key)]
    if not isinstance(target, dict):
        raise NotHere(key)
    if create and key not in target:
        target[key] = {}
    return target[key]


def put(path: str, value: Any) -> Edit:
    """Set one value; `*` sets it on every item; a callable value is given (ctx, data)."""

    def edit(data: dict, ctx: Any) -> None:
        keys = path.split(".")
        targets = [data]
        for key in keys[:-1]:
            nxt: list[Any] = []
            for t in targets:
                if key == "*":
                    if not isinstance(t, list):
                        raise NotHere(key)
                    nxt.extend(t)
                else:
                    nxt.append(_step(t, key, create=True))
            targets = nxt
        for t in targets:
            if not isinstance(t, (dict, list)):
                raise NotHere(keys[-1])
            v = value(ctx, data) if callable(value) else value
            if isinstance(t, list):
                t[int(keys[-1])] = v
            else:
                t[keys[-1]] = v

    return edit


def drop(path: str) -> Edit:
    """Remove one key (the field then takes its default)."""

    def edit(data: dict, ctx: Any) -> None:
        *parents, last = path.split(".")
        target: Any = data
        for key in parents:
            target = _step(target, key, create=False)
        if isinstance(target, dict):
            target.pop(last, None)

    return edit


def get(data: dict, path: str) -> Any:
    target: Any = data
    for key in path.split("."):
        target = target[int(key)] if isinstance(target, list) else target[key]
    return target


def toggle(path: str, one: Any, other: Any) -> Edit:
    """Set `other`, or `one` where the value already is `other` (a variant may start from either)."""

    def edit(data: dict, ctx: Any) -> None:
        try:
            current = get(data, path)
        except (KeyError, IndexError, TypeError):
            current = None
        put(path, one if current == other else other)(data, ctx)

    return edit


def both(*edits: Edit) -> Edit:
    def edit(data: dict, ctx: Any) -> None:
        for e in edits:
            e(data, ctx)

    return edit
