"""Every operator-settable field of specdec, found by introspection.

Five sources: the campaign contract (walked recursively through nested
models, unions, lists and dicts: the matrix and serving contracts live under
it), the service settings (`RuntimeSettings`, one `SPECDEC_*` variable each)
and every flag and positional argument of every command line specdec has:
each `specdec` subcommand, `specdec demo` (services/cli/demo.py) and the
container health check (services/runtime/health/healthcheck.py); the MCP server's
settings (`McpSettings`, services/mcp/auth.py) and every argument of every MCP
tool, as the real server (services.mcp.server.build_server) lists its tools.

Besides the model's fields, the keys of a mapping and the items of a list are
settings of their own: each `capacity.selectors` key under its scheduler (the
table is contracts/selectors.py) and each item of a list of plain values or of
cells (`traffic.shapes`, `matrix.cells`, a cell's `concurrency`,
`gate.guards`): a consumer that reads only the first shape, or only some keys,
passes a check of the list as a whole.

Names:
- campaign fields are dotted paths; `[]` marks a list item
  (`matrix.cells[].serving.dtype`). A field that may be null or a plain value
  as well as a nested model (`standing`, `commands.serve`) is a field itself,
  besides its nested fields: choosing null or `builtin` is a setting too.
- settings are `env SPECDEC_<NAME>` (RuntimeSettings and McpSettings alike).
- MCP tool arguments are `mcp <tool>.<argument>`.
- CLI arguments are `cli specdec <subcommand...> <option or positional>`,
  `cli specdec demo <option>` and `cli healthcheck <subcommand> <option>`.
- a selector key is `capacity.selectors{<scheduler>}.<key>`; a list item is the
  list's path with its index, `traffic.shapes[1]`, `matrix.cells[2]`,
  `matrix.cells[].concurrency[1]`, `gate.guards[0]`.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from typing import Any, Union

from pydantic import BaseModel, RootModel

from contracts.campaign import Campaign
from contracts.selectors import TABLES
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


def _plain_list(annotation: Any) -> bool:
    """list[str], list[int], ... (not an argv template: that is one value)."""
    origin = typing.get_origin(annotation)
    if origin not in (list, tuple):
        return False
    return all(_nested(alt)[0] is None for arg in typing.get_args(annotation) for alt in _alternatives(arg))


def list_fields(model: type[BaseModel] = Campaign, prefix: str = "") -> list[str]:
    """Dotted paths of every list whose items are settings of their own: lists of plain
    values and lists of models (the cells), walked like model_fields."""
    paths: list[str] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        for alt in _alternatives(info.annotation):
            if _plain_list(alt):
                paths.append(path)
                continue
            sub, suffix = _nested(alt)
            if sub is None:
                continue
            if suffix.startswith("[]"):
                paths.append(path)
            paths.extend(list_fields(sub, f"{path}{suffix}."))
    return sorted(set(paths))


def selector_keys() -> list[str]:
    """Every capacity.selectors key under its scheduler (contracts/selectors.py)."""
    return [f"capacity.selectors{{{scheduler}}}.{key}" for scheduler, keys in TABLES.items() for key in keys]


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


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parser_of(main: Callable[[list[str]], Any]) -> argparse.ArgumentParser:
    """The parser an entry point builds inside its `main(argv)`: caught at its parse_args call,
    before the entry point does anything else (demo and healthcheck build theirs inline)."""
    original = argparse.ArgumentParser.parse_args

    def caught(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Parsed(self)

    argparse.ArgumentParser.parse_args = caught  # type: ignore[method-assign]  # caught for the walk
    try:
        main([])
    except _Parsed as found:
        return found.parser
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]  # restored
    raise AssertionError(f"{main.__module__}.main built no parser")


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command line specdec has, by the prefix its arguments are named with."""
    from services.cli import demo
    from services.mcp import command
    from services.runtime.health import healthcheck

    # `specdec mcp ARGS` hands ARGS to the MCP server's own command line (services/mcp/command.py).
    return {"cli specdec": build_parser(), "cli specdec demo": parser_of(demo.main),
            "cli specdec mcp": command.build_parser(), "cli healthcheck": parser_of(healthcheck.main)}


def cli_arguments() -> list[str]:
    """Every argument of every subcommand of every parser (help actions aside)."""
    return sorted(name for prefix, parser in parsers().items() for name in _actions(parser, prefix))


def mcp_settings_fields() -> list[str]:
    from services.mcp.auth import McpSettings

    return [f"env SPECDEC_{name.upper()}" for name in McpSettings.model_fields]


def mcp_server(settings: RuntimeSettings | None = None) -> Any:
    """The real MCP server (services.mcp.server.build_server) over the use cases' own dependencies;
    building it connects to nothing."""
    from services.mcp.deps import default_deps
    from services.mcp.server import build_server

    return build_server(default_deps(settings or RuntimeSettings(instance="guard"), None))


def mcp_arguments(server: Any = None) -> list[str]:
    """`mcp <tool>.<argument>` for every property of every tool's input schema, as the server lists its tools."""
    import asyncio

    tools = asyncio.run((server or mcp_server()).list_tools())
    return sorted(f"mcp {tool.name}.{name}" for tool in tools for name in tool.input_schema.get("properties", {}))


def every_field() -> list[str]:
    return [*campaign_fields(), *selector_keys(), *settings_fields(), *mcp_settings_fields(), *cli_arguments(),
            *mcp_arguments()]
