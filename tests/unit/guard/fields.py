"""Every operator-settable field of specdec, found by introspection.

Three sources: the campaign contract (walked recursively through nested
models, unions, lists and dicts: the matrix and serving contracts live under
it), the service settings (`RuntimeSettings`, one `SPECDEC_*` variable each)
and every flag and positional argument of every `specdec` subcommand.

Names:
- campaign fields are dotted paths; `[]` marks a list item
  (`matrix.cells[].serving.dtype`). A field that may be null or a plain value
  as well as a nested model (`standing`, `commands.serve`) is a field itself,
  besides its nested fields: choosing null or `builtin` is a setting too.
- settings are `env SPECDEC_<NAME>`.
- CLI arguments are `cli specdec <subcommand...> <option or positional>`.
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Union

from pydantic import BaseModel, RootModel

from contracts.campaign import Campaign
from services.cli.main import build_parser
from services.runtime.settings import RuntimeSettings


def _alternatives(annotation: Any) -> list[Any]:
    """The members of a union (Optional included), else the annotation itself."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _alternatives(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [alt for arg in typing.get_args(annotation) for alt in _alternatives(arg)]
    return [annotation]


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """(nested model, path suffix) of one union member: list[M] -> (M, '[]'), dict[str, M] -> (M, '{}')."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        for arg in args:
            for alt in _alternatives(arg):
                model, suffix = _nested(alt)
                if model is not None:
                    return model, "[]" + suffix
        return None, ""
    if origin is dict:
        for alt in _alternatives(typing.get_args(annotation)[1]):
            model, suffix = _nested(alt)
            if model is not None:
                return model, "{}" + suffix
        return None, ""
    is_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
    # A RootModel (an argv template) is one value, not a group of fields.
    if is_model and not issubclass(annotation, RootModel):
        return annotation, ""
    return None, ""


def model_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted paths of every settable field under `model`."""
    paths: list[str] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = []
        plain = False
        for alt in _alternatives(info.annotation):
            sub, suffix = _nested(alt)
            if sub is None:
                plain = True  # None, a literal such as 'builtin', or a plain value
            else:
                nested.append((sub, suffix))
        if plain or not nested:
            paths.append(path)
        for sub, suffix in nested:
            paths.extend(model_fields(sub, f"{path}{suffix}."))
    return sorted(set(paths))


def campaign_fields() -> list[str]:
    return model_fields(Campaign)


def settings_fields() -> list[str]:
    return [f"env SPECDEC_{name.upper()}" for name in RuntimeSettings.model_fields]


def _actions(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(_actions(sub, f"{prefix} {name}"))
            continue
        name = max(action.option_strings, key=len) if action.option_strings else f"<{action.dest}>"
        found.append(f"{prefix} {name}")
    return found


def cli_arguments() -> list[str]:
    """Every argument of every subcommand (help actions aside)."""
    return sorted(_actions(build_parser(), "cli specdec"))


def every_field() -> list[str]:
    return [*campaign_fields(), *settings_fields(), *cli_arguments()]
