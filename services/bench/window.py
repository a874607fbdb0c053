"""One measured window in a process of its own: `python -m services.bench.window`.

Why a process: the load generator's timestamps are only as good as its event
loop's promptness. Inside a long-running service process (broker loops,
heartbeats, reclaimers, the vLLM modules imported for planning) that loop was
measured stalling 100-800 ms during windows on 2-core machines, and every chunk
that arrived meanwhile was timestamped at once: TPOT of 0.01 ms for whole
windows. A fresh process that only drives the window showed no such stalls
against the same server (docs/bench-runner.md, "Measurement process").

Protocol: stdin carries one JSON object `{"spec": WindowSpec, "prompts": [Prompt]}`;
stdout carries the WindowRecord as JSON; a failure exits non-zero with the
reason on stderr. The child is labelled like every process the bench-runner
starts (experiment=<run_id>) and dies with it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence

import orjson

from services.bench.errors import WindowProcessFailed
from services.bench.executor import SERVICE
from services.bench.loadgen import LoadGenerator, WindowRecord, WindowSpec
from services.bench.prompts import Prompt
from services.runtime.errors import SpecdecError
from services.runtime.procs import spawn


def request_bytes(spec: WindowSpec, prompts: Sequence[Prompt]) -> bytes:
    return orjson.dumps({"spec": spec.model_dump(mode="json"), "prompts": [p.model_dump(mode="json") for p in prompts]})


async def run_window_process(spec: WindowSpec, prompts: Sequence[Prompt], *, run_id: str) -> WindowRecord:
    """Drive one window from a child process; its record, or WindowProcessFailed with its stderr."""
    process = spawn([sys.executable, "-m", "services.bench.window"], run_id=run_id, service=SERVICE,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = await asyncio.to_thread(process.communicate, request_bytes(spec, prompts))
    if process.returncode != 0:
        raise WindowProcessFailed(
            f"the measurement process exited with {process.returncode}: "
            f"{stderr[-2000:].decode('utf-8', 'replace').strip() or 'no output'}")
    try:
        return WindowRecord.model_validate_json(stdout)
    except ValueError as exc:
        raise WindowProcessFailed(f"the measurement process wrote no window record: {exc}") from None


def main() -> int:
    try:
        request = orjson.loads(sys.stdin.buffer.read())
        spec = WindowSpec.model_validate(request["spec"])
        prompts = [Prompt.model_validate(p) for p in request["prompts"]]
    except (ValueError, KeyError, TypeError) as exc:
        print(f"specdec window: unreadable request on stdin: {exc}", file=sys.stderr)
        return 2
    try:
        record = asyncio.run(LoadGenerator(spec).run_window(prompts))
    except SpecdecError as exc:
        print(f"specdec window: {exc}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(record.model_dump_json().encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
