"""Every name a step reads as a request input (contracts/inputs.py) changes what
the step runs: the CLI passes it on (test_guard_cli_settings.py), and here the
step's own planner, given the request with one artifact or another under that
name, serves, sends or trains on something else. A name in the table that its
step does not read fails here; a name missing from the table is refused by
`specdec request` (test_guard_items.py, "unknown --input names refused")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contracts import layout
from contracts.envelope import ArtifactRef
from contracts.events import BenchRequested, TrainingRequested
from contracts.inputs import STEP_INPUTS
from tests.unit.guard.context import OTHER_RUN, RUN, Ctx
from tests.unit.guard.observe import Refused, outcome
from tests.unit.guard.runs import DRAFTS, THIRD_RUN, runs


def _bench_serves(ctx: Ctx, ref: ArtifactRef) -> Any:
    """The serve argv of every cell, with the draft the request names."""
    from services.bench.planning.builder import build_plan
    from services.bench.planning.staging import load_matrix, training_output

    built = runs(ctx)
    event = BenchRequested(run_id=RUN, producer="guard", requested_by="guard", inputs={"training.output": ref})
    draft = training_output(built.bundle, event)
    plan = outcome(build_plan, built.campaign, load_matrix(built.campaign), run_id=RUN, default_node="node-a",
                   training_output=draft, prompts={"source": layout.BENCH_PROMPTS})
    return plan if isinstance(plan, Refused) else [cell.serve_argv for cell in plan.cells]


def _bench_prompts(ctx: Ctx, ref: ArtifactRef) -> Any:
    """The prompts every window sends, from the corpus the request names."""
    from services.bench.planning.staging import build_prompts, load_matrix

    built = runs(ctx)
    event = BenchRequested(run_id=RUN, producer="guard", requested_by="guard", inputs={"corpus": ref})
    found = outcome(build_prompts, built.bundle, built.campaign, load_matrix(built.campaign), event)
    return found if isinstance(found, Refused) else [p.model_dump(mode="json") for p in found]


def _training_data(ctx: Ctx, ref: ArtifactRef) -> Any:
    """The data the trainer is given, from the corpus the request names."""
    from services.trainer_proxy.planning.staging import plan_training

    built = runs(ctx)
    bundle = built.copy_of(ctx)
    event = TrainingRequested(run_id=RUN, producer="guard", requested_by="guard", inputs={"corpus": ref})
    plan = outcome(lambda: plan_training(bundle, built.campaign, event)[0])
    return plan if isinstance(plan, Refused) else plan.inputs.model_dump(mode="json")


# (step, name) -> (what the step does with the input, two artifacts to give it)
CONSUMERS: dict[tuple[str, str], tuple[Callable[[Ctx, ArtifactRef], Any], tuple[tuple[str, str], tuple[str, str]]]] = {
    ("bench", "training.output"): (_bench_serves, ((OTHER_RUN, DRAFTS[0]), (OTHER_RUN, DRAFTS[1]))),
    ("bench", "corpus"): (_bench_prompts, ((RUN, layout.CORPUS), (OTHER_RUN, layout.CORPUS))),
    # Both corpora come from this run's own profile: a training input must (the other is refused).
    ("training", "corpus"): (_training_data, ((RUN, layout.CORPUS), (THIRD_RUN, layout.CORPUS))),
}
NAMES = [(step, name) for step, inputs in STEP_INPUTS.items() for name in inputs]


def test_every_request_input_has_a_consumer_shown():
    assert sorted(CONSUMERS) == sorted(NAMES), (
        f"request inputs without a consumer shown here: {sorted(set(NAMES) - set(CONSUMERS))}; "
        f"consumers of names the table no longer has: {sorted(set(CONSUMERS) - set(NAMES))}"
    )


@pytest.mark.parametrize(("step", "name"), NAMES, ids=[f"{s}.{n}" for s, n in NAMES])
def test_the_step_reads_the_input(step, name, ctx):
    consumer, (first, second) = CONSUMERS[(step, name)]
    built = runs(ctx)
    before = consumer(ctx, built.ref(*first))
    after = consumer(ctx, built.ref(*second))
    for which, seen in (("first", before), ("second", after)):
        assert not isinstance(seen, Refused), f"{step} refused the {which} {name} input: {seen}"
    assert before != after, f"the {step} step's {name} input changed nothing it runs"
