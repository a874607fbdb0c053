"""Executing an approved bench plan (`BenchRun`): serve each cell, measure, verify, record.

The step's flow: the launches in order, each server opened (idleness re-checked, /health, engine read-back),
its pending trials run, and the server stopped only after their results and hashes are captured; what an
earlier attempt recorded is adopted, and the experiment label is cleaned up after the last launch, whatever
happened. One trial is services/bench/trial.py; warm-interleaved launches rotate through
services/bench/planning/interleave.py. A failed standing cell fails the step (docs/bench-runner.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import layout
from contracts.envelope import ArtifactRef
from contracts.events import BenchTrialCompleted
from services.bench.errors import ServingError, SpeculationNotActive
from services.bench.executors import engine_config, preflight
from services.bench.executors.executor import LocalExecutor, Served, ServingExecutor
from services.bench.loadgen.prompts import Prompt
from services.bench.planning import interleave, resume, rounds
from services.bench.planning.model import BenchPlan, Block, CellPlan, Launch
from services.bench.progress import BenchProgress, Snapshot
from services.bench.trial import Emit, Measured, TrialSteps, trial_fields
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import SpecdecError, StepFailed
from services.shared.secret_args import mask_document

Recheck = Callable[[str], Awaitable[str | None]]  # node -> None when idle, else why not
Report = Callable[[Snapshot], Awaitable[None]]  # publishes one step.progress (services/bench/progress.py)


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


class BenchRun(TrialSteps):
    """Runs one plan against the bundle; emits bench.trial.completed as it goes."""

    outcome: Outcome  # TrialSteps records into any Recorded; this run's is the whole Outcome

    def __init__(
        self, plan: BenchPlan, bundle: BundleStore, prompts: list[Prompt], *, emit: Emit, recheck: Recheck,
        event_factory: Callable[..., BenchTrialCompleted], eval_values: dict[str, str] | None = None,
        executor: ServingExecutor | None = None, max_model_len: int | None = None, report: Report | None = None,
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
        # The node lock's token this bench holds (services/bench/node_lock.py), written beside each launch.
        self.lock_token: str | None = None
        # Windows done out of the plan's, and the time left, relayed as step.progress (not journaled).
        self.report = report
        self.progress = BenchProgress(
            (index, launch.cell_id, ((launch.cell_id, trial, concurrency) for trial in launch.trials
                                     for concurrency in self.cells[launch.cell_id].concurrency))
            for index, launch in enumerate(plan.launches))

    async def execute(self) -> Outcome:
        self.attempt = resume.begin_attempt(self.bundle, self.run_id)
        # A restarted runner first stops what an interrupted delivery left (by label);
        # the last cleanup runs whatever happens, cancellation included.
        try:
            taken_back = await self.executor.prepare()
        except ServingError as exc:
            raise StepFailed(f"the {self.plan.executor} executor cannot start: {exc}; nothing was launched",
                             error_type="ExecutorUnavailable") from None
        self.outcome.cleaned += taken_back
        if taken_back:
            # Evidence of what this attempt ended before its first launch (only when it ended something).
            self.bundle.write_json(self.run_id, layout.bench_takeback(self.attempt), {"ended": taken_back})
        try:
            await self._announce_recorded()
            await self._report(final=True)  # the total at once, before the first server is up
            # A cell its serving interpreter cannot run fails here, by name, before anything is launched.
            self.outcome.failed_cells.update(await preflight.suffix_failures(self.plan))
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
                    self.outcome.failed_cells[cell.cell_id] = (
                        f"node {cell.node} is not idle right before launch: {busy}"
                    )
                    continue
                try:
                    await self._serve(index, cell, launch_plan)
                except (ServingError, SpeculationNotActive, SpecdecError) as exc:
                    self.outcome.failed_cells[cell.cell_id] = str(exc)
            if rotation:
                await interleave.run_interleaved(self, rotation, self.plan.blocks or [], stop=self._stop_rounds())
            await self._report(final=True)
        finally:
            try:
                self.outcome.cleaned += await self.executor.cleanup()
            except SpecdecError as exc:
                # Recorded, not raised: the results above stand, and the operator
                # learns that labelled work may be left (bench.completed's log line).
                self.outcome.cleanup_error = str(exc)
        return self.outcome

    async def _announce_recorded(self) -> None:
        """Emit again the bench.trial.completed of every trial an earlier attempt recorded, same event ID
        (services/bench/trial.py, `trial_event_id`): a kill, or a Redis outage longer than the emit's
        retries, between a result and its event would otherwise lose the event for good."""
        for launch_plan in self.plan.launches:
            cell = self.cells[launch_plan.cell_id]
            for trial in launch_plan.trials:
                for concurrency in cell.concurrency:
                    adopted = resume.adopt(self.bundle, self.run_id, cell.cell_id, trial, concurrency=concurrency)
                    if adopted is not None:
                        self.progress.adopted((cell.cell_id, trial, concurrency))
                        await self.emit(self.event_factory(**trial_fields(
                            self.run_id, cell, trial, concurrency, ref=adopted.ref, result=adopted.result)))

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
                adopted = resume.adopt(self.bundle, self.run_id, cell.cell_id, trial, concurrency=concurrency)
                if adopted is None:
                    pending.append((trial, concurrency))
                else:
                    self._adopt(cell, trial, concurrency, adopted)
        return pending

    async def open_server(self, index: int, cell: CellPlan, launch_plan: Launch) -> Served:
        """Start the launch's server, wait for /health, read its engine back; stopped again on failure."""
        folder = layout.attempt_folder(layout.launch_folder(cell.cell_id, index), self.attempt)
        if self.lock_token is not None:
            # Checked in Redis by the pre-launch re-check just before; recorded as the launch's evidence.
            self.bundle.write_json(
                self.run_id, f"{folder}/node-lock.json", {"node": cell.node, "token": self.lock_token}
            )
        self.progress.launch_started(index)
        server = await self.executor.start(index, launch_plan, cell, folder)
        try:
            self.bundle.write_json(self.run_id, f"{folder}/argv.json", mask_document(server.record()))
            ready_s = await server.wait_ready(self.plan.readiness_timeout_s)
            self.bundle.write_json(self.run_id, f"{folder}/ready.json", {"ready_after_s": round(ready_s, 3)})
            await self._read_back(index, cell, server, folder, ready_s=ready_s)
        except BaseException:
            await self.close_server(server)
            raise
        self.progress.launch_ready(index)
        return server

    async def measure(self, cell: CellPlan, base_url: str, trial: int, concurrency: int) -> Measured:
        window = (cell.cell_id, trial, concurrency)
        self.progress.work_started(window)
        try:
            return await super().measure(cell, base_url, trial, concurrency)
        finally:
            self.progress.work_paused(window)

    async def record(self, measured: Measured) -> None:
        window = (measured.cell.cell_id, measured.trial, measured.concurrency)
        self.progress.work_started(window)
        try:
            await super().record(measured)
        except BaseException:
            self.progress.work_paused(window)
            raise
        self.progress.recorded(window)
        await self._report()

    async def _report(self, *, final: bool = False) -> None:
        """Publish how far the run is (rate-limited; `final` always), when the caller gave a way to."""
        if self.report is None:
            return
        snapshot = self.progress.due(self.outcome.failed_cells, final=final)
        if snapshot is not None:
            await self.report(snapshot)

    async def close_server(self, server: Served) -> None:
        await server.stop()
        for relpath in server.files:
            # A job that never started leaves no log: nothing to register then.
            if (self.bundle.run_dir(self.run_id) / relpath).exists():
                self.bundle.register_file(self.run_id, relpath)

    async def _read_back(self, index: int, cell: CellPlan, server: Served, folder: str, *, ready_s: float) -> None:
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
        """Take a trial an earlier attempt recorded, as if measured now (its event: `_announce_recorded`)."""
        if adopted.problems:
            raise SpeculationNotActive(
                f"speculation declared but not active as declared in cell {cell.cell_id} (trial {trial}, "
                f"concurrency {concurrency}, rejected by an earlier attempt, kept as {adopted.ref.uri}): "
                f"{'; '.join(adopted.problems)}")
        if cell.role == "standing" and adopted.outputs:
            self.standing_outputs[(trial, concurrency)] = adopted.outputs
        self.outcome.results.append(adopted.ref)
        self.progress.adopted((cell.cell_id, trial, concurrency))


def read_prompts(bundle: BundleStore, run_id: str, path: Path) -> list[Prompt]:
    lines = bundle.read_bytes(run_id, str(path)).splitlines()
    return [Prompt.model_validate_json(line) for line in lines if line.strip()]
