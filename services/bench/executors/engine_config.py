"""What the running engine says it runs, read back from a live server and compared with what its cell declared.

The bench run calls `read_back` once per launch, after /health answered and before the first trial, and
fails the cell with `ReadBack.failure()`. How vLLM states its config is engine_log.py's, the rules
engine_compare.py's: import their names from those modules
(docs/bench-runner.md#the-engines-effective-config-read-back)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from contracts.artifacts.engine import EngineCheck
from services.bench.errors import ServingError
from services.bench.executors.engine_compare import declared_of, engine_check, mismatch_reason
from services.bench.executors.engine_log import KNOWN_VERSIONS, EngineLog, effective_config, read_log
from services.bench.planning.model import CellPlan

# How often the log is read again while waiting for the config line.
POLL_S = 0.5
# The line is logged before /health answers; a log on shared storage may trail by a moment.
MIN_WAIT_S = 10.0

LogReader = Callable[[], Awaitable[str]]


class EngineConfigMissing(ServingError):
    """The engine's log never showed its resolved config within the readiness wait."""


class EngineConfigMismatch(ServingError):
    """The engine runs something other than what its cell declared; the message names every field."""


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
