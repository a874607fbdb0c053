"""The warm-interleaved regime: every cell's server up at once, the trials rotated across them in blocks.

So drift over a run hits every arm alike. The block and launch orders are the approved plan's, drawn
from the run ID (`block_order`, `launch_order`): the run executes the stored order, never a recomputed
one. `run_interleaved` drives the blocks through the bench run's steps (`Runner`); a block's windows are
recorded standing cell first (docs/bench-runner.md#regimes)."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from contracts.errors import SpecdecError
from services.bench.planning.model import INTERLEAVED as REGIME
from services.bench.planning.model import Block, CellPlan, Launch


def block_order(run_id: str, cells: Sequence[CellPlan], *, trials: int | None = None) -> list[Block]:
    """The blocks of the warm-interleaved cells: block b holds every cell with more than b
    trials, shuffled; none for a plan without such cells. `trials`: sequential rounds' cap,
    every cell's trials up to it (the blocks past the minimum run only while the rounds go on)."""
    interleaved = [cell for cell in cells if cell.regime == REGIME]
    # Seeded from the run ID, not the clock: the plan is reproducible from its run.
    rng = random.Random(int.from_bytes(hashlib.sha256(run_id.encode("utf-8")).digest(), "big"))
    blocks = []
    counts = {cell.cell_id: trials or cell.trials for cell in interleaved}
    for index in range(max(counts.values(), default=0)):
        order = [cell.cell_id for cell in interleaved if index < counts[cell.cell_id]]
        rng.shuffle(order)
        blocks.append(Block(index=index, order=order))
    return blocks


def launch_order(run_id: str, cells: Sequence[CellPlan]) -> list[str]:
    """The order the warm-interleaved cells' servers are launched in: shuffled per run.

    The servers start together, but in an order; always launching the standing cell
    first would give any effect of launch order (a later server measured a few per
    cent slower was not excluded by the A/A campaigns, docs/gate.md) to the
    candidates alone, every run. Shuffled, it falls on a random arm. Seeded from
    the run ID, on a stream of its own, so the blocks drawn for a run stay as before."""
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{run_id}:launches".encode()).digest(), "big"))
    order = [cell.cell_id for cell in cells if cell.regime == REGIME]
    rng.shuffle(order)
    return order


class Served(Protocol):
    """A started server, as far as the rotation looks (services/bench/executors/executor.py's Served).
    Not imported from there: the plan imports this module, and the plan never imports an executor."""

    base_url: str


# The server type a run's open_server gives and its close_server takes back.
ServedT = TypeVar("ServedT", bound=Served)


class Runner(Protocol, Generic[ServedT]):
    """What the rotation needs of a bench run (services/bench/run.py's BenchRun)."""

    cells: dict[str, CellPlan]

    @property
    def recheck(self) -> Callable[[str], Awaitable[str | None]]:
        """The pre-launch re-check: None when idle, else why not."""
        ...

    @property
    def failed(self) -> dict[str, str]:
        """cell_id -> why it failed; the rotation adds to it."""
        ...

    def pending(self, cell: CellPlan, trials: Sequence[int]) -> list[tuple[int, int]]:
        """(trial, concurrency) still to measure; the rest is adopted from an earlier attempt."""
        ...

    async def open_server(self, index: int, cell: CellPlan, launch: Launch) -> ServedT:
        """Start launch `index`, wait for it and read its engine back (stopped again on failure)."""
        ...

    async def close_server(self, server: ServedT) -> None:
        """Stop a server and register the files it left."""
        ...

    async def measure(self, cell: CellPlan, base_url: str, trial: int, concurrency: int) -> Any:
        """Drive one window; what `record` takes."""
        ...

    async def record(self, window: Any) -> None:
        """Evaluate, check and write one measured window (raises when its cell fails there)."""
        ...


async def run_interleaved(
    runner: Runner[ServedT], launches: Sequence[tuple[int, Launch]], blocks: Sequence[Block],
    *, stop: Callable[[Block], bool] | None = None,
) -> None:
    """Start every launch's server, run the blocks in order, stop every server.

    `stop` (sequential rounds): asked after each block; True ends the rotation there."""
    servers: dict[str, ServedT] = {}
    todo: dict[str, set[tuple[int, int]]] = {}
    try:
        await _start_all(runner, launches, servers, todo)
        for block in blocks:
            await _run_block(runner, block, servers, todo)
            for cell_id in [c for c in servers if c in runner.failed]:
                # Never measured again: stopped now, so it neither holds memory nor loads the
                # node during the other cells' windows.
                await _close(runner, cell_id, servers.pop(cell_id))
            if stop is not None and stop(block):
                break
    finally:
        for cell_id in list(servers):
            await _close(runner, cell_id, servers.pop(cell_id))


async def _start_all(
    runner: Runner[ServedT], launches: Sequence[tuple[int, Launch]], servers: dict[str, ServedT],
    todo: dict[str, set[tuple[int, int]]],
) -> None:
    """Start every server at once: the rotation needs them all up before its first block, and
    a start is mostly waiting (imports, model load, the engine's first profile run), so
    overlapping them saves most of the time that starting them one after another would cost.
    Each node is re-checked once, before the first start on it (afterwards the check would
    see this rotation's own servers)."""
    checked: dict[str, str | None] = {}
    starting: list[tuple[int, Launch, CellPlan, list[tuple[int, int]]]] = []
    for index, launch in launches:
        cell = runner.cells[launch.cell_id]
        if cell.cell_id in runner.failed:
            continue
        if cell.node not in checked:
            checked[cell.node] = await runner.recheck(cell.node)
        busy = checked[cell.node]
        if busy is not None:
            runner.failed[cell.cell_id] = f"node {cell.node} is not idle right before launch: {busy}"
            continue
        pending = runner.pending(cell, launch.trials)
        if pending:  # else an earlier attempt measured every trial of this cell
            starting.append((index, launch, cell, pending))
    started = await asyncio.gather(*(runner.open_server(index, cell, launch) for index, launch, cell, _ in starting),
                                   return_exceptions=True)
    unexpected: BaseException | None = None
    for (_, _, cell, pending), outcome in zip(starting, started, strict=True):
        if isinstance(outcome, SpecdecError):
            runner.failed[cell.cell_id] = str(outcome)
        elif isinstance(outcome, BaseException):
            unexpected = unexpected or outcome
        else:
            servers[cell.cell_id] = outcome
            todo[cell.cell_id] = set(pending)
    if unexpected is not None:
        raise unexpected  # the caller's finally stops every server that did start


async def _run_block(
    runner: Runner[ServedT], block: Block, servers: dict[str, ServedT], todo: dict[str, set[tuple[int, int]]]
) -> None:
    measured: list[tuple[CellPlan, Any]] = []
    for cell_id in block.order:
        cell = runner.cells[cell_id]
        if cell_id in runner.failed or cell_id not in servers:
            continue
        for concurrency in cell.concurrency:
            if (block.index, concurrency) not in todo[cell_id]:
                continue
            try:
                measured.append((cell, await runner.measure(cell, servers[cell_id].base_url, block.index, concurrency)))
            except SpecdecError as exc:
                runner.failed[cell_id] = str(exc)
                break  # its other levels are not measured; what it measured before is still recorded
    rejected: set[str] = set()
    # Stable sort: the standing cell's windows first, the others in the order measured.
    for cell, window in sorted(measured, key=lambda item: item[0].role != "standing"):
        if cell.cell_id in rejected:
            continue  # as in every regime, a cell stops at its first rejected trial
        try:
            await runner.record(window)
        except SpecdecError as exc:
            rejected.add(cell.cell_id)
            runner.failed[cell.cell_id] = str(exc)


async def _close(runner: Runner[ServedT], cell_id: str, server: ServedT) -> None:
    try:
        await runner.close_server(server)
    except SpecdecError as exc:
        # Its results are recorded; labelled leftovers are stopped by the step's cleanup.
        runner.failed.setdefault(cell_id, f"its server could not be stopped: {exc}")
