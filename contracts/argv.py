"""Operator argv templates: lists of strings with whitelisted `{placeholder}` fields.

Nothing runs through a shell: a template renders to a list of strings that is
passed to exec as is. `{{` and `}}` stand for literal braces. An unknown
placeholder, and any token that looks like an acknowledgement, is an error at
validation time, so a bad template never reaches a plan.

One token in, one token out, with one exception: a *flag placeholder* (a name
ending in `_flag`, e.g. `{enforce_eager_flag}`) stands for a whole token that
is either present or absent. It must be a list item of its own; it renders to
one complete token (`--enforce-eager`, `--max-num-seqs=8`) or, when the field
is off or unset, the item is dropped. So a switch is expressed without a shell
and without ever passing an empty string as an argument. Which step fills which
placeholder is in contracts/templates/values.py; the submit-time rules are in
contracts/templates/check.py and docs/configuration.md ("Operator argv
templates").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import RootModel, field_validator

from contracts.errors import SpecdecError

# The one whitelist of placeholders (docs/configuration.md, "Placeholders").
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
    "speculative_config_json": "the cell's speculative config as vLLM's --speculative-config JSON ('' for none)",
    "speculative_config_flag": "flag: --speculative-config=JSON, or nothing without speculation",
    "dtype": "the cell's serving.dtype (auto unless declared)",
    "quantization": "the cell's serving.quantization ('' for none, which vLLM reads as none)",
    "quantization_flag": "flag: --quantization=METHOD, or nothing without quantization",
    "tensor_parallel_size": "the cell's serving.tensor_parallel_size",
    "enforce_eager_flag": "flag: --enforce-eager for graph_mode eager, nothing for graph",
    "max_num_seqs": "the cell's serving.max_num_seqs (only when declared)",
    "max_num_seqs_flag": "flag: --max-num-seqs=N, or nothing when max_num_seqs is unset",
    "max_model_len": "the target's maximum model length",
    "result_path": "path the bench command writes its result JSON to",
    "result_dir": "folder of result_path (vllm bench serve --result-dir)",
    "result_filename": "file name of result_path (vllm bench serve --result-filename)",
    "prompts_path": "path of the bench's prompts (bench/prompts.jsonl of the run, one JSON prompt a line)",
    "endpoint": "API path of matrix.load.endpoint: /v1/completions or /v1/chat/completions",
    "num_prompts": "number of measured prompts",
    "concurrency": "maximum concurrency of the measured window (one of the cell's levels)",
    "warmup_requests": "matrix.load.warmup_requests: requests before the window, excluded from figures",
    "request_rate": "matrix.load.request_rate in requests/s; inf when unset (as fast as the concurrency allows)",
    "burstiness": "matrix.load.burstiness (gamma shape of inter-arrivals)",
    "max_output_tokens": "matrix.load.max_output_tokens (only when declared)",
    "ignore_eos": "matrix.load.ignore_eos: true or false",
    "ignore_eos_flag": "flag: --ignore-eos when matrix.load.ignore_eos is true, else nothing",
    "node": "node selected by the capacity step",
    "training.output": "directory of the draft checkpoint produced by training",
}
# Placeholders that stand for a whole token, present or absent (module docstring).
FLAG_PLACEHOLDERS: frozenset[str] = frozenset(name for name in PLACEHOLDERS if name.endswith("_flag"))

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


def token_placeholders(token: str) -> list[str]:
    """The placeholder names inside one (valid) token, in order."""
    return _fields(token)


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
        if name in FLAG_PLACEHOLDERS and token != "{" + name + "}":
            raise ArgvError(
                f"{{{name}}} stands for a whole argv token (a flag or nothing), but it is inside {token!r}: "
                f"write \"{{{name}}}\" as a list item of its own"
            )


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
        """The argv to exec. Values are inserted verbatim: they are never re-parsed.
        A flag placeholder whose value is empty drops its item (module docstring)."""
        rendered = []
        for token in self.root:
            text = render_token(token, values)
            if text == "" and token[1:-1] in FLAG_PLACEHOLDERS:
                continue
            rendered.append(text)
        return rendered
