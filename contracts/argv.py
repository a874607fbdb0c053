"""Operator argv templates: lists of strings with whitelisted `{placeholder}` fields.

Nothing runs through a shell: a template renders to a list of strings that is
passed to exec as is. `{{` and `}}` stand for literal braces. An unknown
placeholder, and any token that looks like an acknowledgement, is an error at
validation time, so a bad template never reaches a plan.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import RootModel, field_validator

from contracts.errors import SpecdecError

# The one whitelist of placeholders (DESIGN.md, "The campaign file").
PLACEHOLDERS: dict[str, str] = {
    "run_id": "the run ID (also the experiment label value)",
    "corpus": "path of CORPUS.jsonl",
    "corpus_train": "path of the corpus's train split",
    "corpus_heldout": "path of the corpus's heldout split",
    "target": "path of the target checkpoint",
    "tokenizer": "path of the target's tokenizer",
    "output_dir": "directory the step writes its outputs to",
    "model": "model path or name served by the cell",
    "host": "host the server binds or is reached on",
    "port": "port of the server",
    "base_url": "http://host:port of the served cell",
    "speculative_config_json": "the cell's speculative config as vLLM's --speculative-config JSON",
    "result_path": "path the bench command writes its result JSON to",
    "max_model_len": "the target's maximum model length",
    "num_prompts": "number of measured prompts",
    "concurrency": "maximum concurrency of the measured load",
    "node": "node selected by the capacity step",
    "training.output": "directory of the draft checkpoint produced by training",
}

_FIELD_RE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
# An acknowledgement is a typed field of the request, never a raw token: any
# spelling of "i understand" inside an argv is refused.
_ACK_RE = re.compile(r"i[\s_-]*understand", re.IGNORECASE)


class ArgvError(SpecdecError, ValueError):
    """An argv template is invalid or cannot be rendered.

    A ValueError too, so pydantic reports it as a validation error of the field."""


def _fields(token: str) -> list[str]:
    names = []
    for match in _FIELD_RE.finditer(token):
        text = match.group(0)
        if text in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise ArgvError(f"unbalanced brace in argv token {token!r}; write {{{{ or }}}} for a literal brace")
        names.append(match.group(1))
    return names


def check_token(token: str) -> None:
    if _ACK_RE.search(token):
        raise ArgvError(
            f"argv token {token!r} looks like an acknowledgement; acknowledgements are typed fields "
            "of the campaign or the CLI flag, never tokens inside an argv"
        )
    for name in _fields(token):
        if name not in PLACEHOLDERS:
            allowed = ", ".join("{" + key + "}" for key in PLACEHOLDERS)
            raise ArgvError(f"unknown placeholder {{{name}}} in argv token {token!r}; allowed: {allowed}")


def render_token(token: str, values: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "{{":
            return "{"
        if text == "}}":
            return "}"
        name = match.group(1)
        if name not in values:
            raise ArgvError(f"placeholder {{{name}}} has no value at this step; it needs one of: {sorted(values)}")
        return str(values[name])

    return _FIELD_RE.sub(substitute, token)


class ArgvTemplate(RootModel[list[str]]):
    """A command as a list of strings (no shell), with whitelisted {placeholders}."""

    @field_validator("root")
    @classmethod
    def _check(cls, argv: list[str]) -> list[str]:
        if not argv:
            raise ArgvError("an argv template needs at least the program")
        if not argv[0].strip():
            raise ArgvError("the program (argv[0]) is empty")
        for token in argv:
            check_token(token)
        return argv

    def placeholders(self) -> set[str]:
        return {name for token in self.root for name in _fields(token)}

    def render(self, values: Mapping[str, str]) -> list[str]:
        """The argv to exec. Values are inserted verbatim: they are never re-parsed."""
        rendered = [render_token(token, values) for token in self.root]
        return rendered
