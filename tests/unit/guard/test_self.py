"""The guard catches what it exists for:

- a field added to the campaign without a consumer is reported by name, under
  every variant: by the walk (no checker) and by the verdict (changed nothing);
- a consumer taken away (the builtin load generator's and the operator bench's
  warm-up) is reported, under every variant;
- each item of the issue's list fails its case when its fix is reverted (the
  revert is a monkeypatch back to the code before the fix).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from contracts.campaign import Campaign, GateSpec, LoadSpec
from tests.support.campaign_models import dropped, in_place, variant_of, without
from tests.unit.guard.campaign_checks import CHECKS, Check
from tests.unit.guard.context import Ctx
from tests.unit.guard.edits import put
from tests.unit.guard.fields import model_fields
from tests.unit.guard.guard import judge
from tests.unit.guard.items import ITEMS
from tests.unit.guard.observe import OBSERVABLES
from tests.unit.guard.test_campaign_fields import unchecked
from tests.unit.guard.variants import VARIANTS

SYNTHETIC = "matrix.load.synthetic_knob"
_FRESH = itertools.count()


@pytest.fixture
def fresh(ctx: Ctx) -> Ctx:
    """The session's inputs with empty caches: what a patched consumer does is observed anew."""
    tmp = ctx.tmp / f"fresh-{next(_FRESH)}"
    tmp.mkdir()
    return dataclasses.replace(ctx, tmp=tmp, caches={}, counter=0)


def test_a_field_added_without_a_consumer_is_reported_by_name_under_every_variant(fresh):
    load = without(LoadSpec, synthetic_knob=(float, Field(default=1.0, description="A knob nothing reads.")))
    model = variant_of(load=load)
    assert SYNTHETIC in model_fields(model), "the walk must find a field added to a nested model"
    assert unchecked(model_fields(model)) == [SYNTHETIC], "the coverage test must name the field without a checker"
    check = Check(tuple(OBSERVABLES), put(SYNTHETIC, 2.0))
    with in_place(model):
        verdicts = {v.id: judge(fresh, SYNTHETIC, check, v) for v in VARIANTS}
    for variant, verdict in verdicts.items():
        assert verdict is not None and f"{SYNTHETIC} under {variant} changed nothing that runs" in verdict, verdict


def test_a_consumer_taken_away_is_reported_under_every_variant(fresh, monkeypatch):
    from services.bench import trial

    window_spec, bench_values = trial._window_spec, trial.bench_values

    def no_warmup_window(*args: Any, **kwargs: Any) -> Any:
        return window_spec(*args, **kwargs).model_copy(update={"warmup_requests": 4})

    def no_warmup_values(*args: Any, **kwargs: Any) -> dict[str, str]:
        return {**bench_values(*args, **kwargs), "warmup_requests": "4"}

    field = "matrix.load.warmup_requests"
    assert all(judge(fresh, field, CHECKS[field], v) is None for v in VARIANTS[:1])
    monkeypatch.setattr(trial, "_window_spec", no_warmup_window)
    monkeypatch.setattr(trial, "bench_values", no_warmup_values)
    fresh.forget()
    for variant in VARIANTS:
        verdict = judge(fresh, field, CHECKS[field], variant)
        assert verdict is not None and f"{field} under {variant.id} changed nothing" in verdict, verdict


def test_a_conditional_inert_entry_taken_away_is_reported_where_it_held(fresh, monkeypatch):
    field = "source_revisions.target"
    shapes = [v for v in VARIANTS if v.traffic == "shapes"]
    assert all(judge(fresh, field, CHECKS[field], v) is None for v in shapes)
    monkeypatch.setattr("contracts.inert.INERT_WHERE", {})
    fresh.forget()
    for variant in shapes:
        verdict = judge(fresh, field, CHECKS[field], variant)
        assert verdict is not None and "accepted and changes nothing" in verdict, verdict


# --- each item's fix, reverted ------------------------------------------------------------------


def _old_absolutize(campaign: Any, base: Path) -> Any:
    """services/app/campaign/prepare.absolutize before the fix: a matrix file's path resolved, not its cells."""
    from services.app.campaign import prepare

    data = campaign.model_dump(by_alias=True)
    for part, key in (("target", "checkpoint"), ("target", "tokenizer"), ("traffic", "path")):
        if key in data[part]:
            data[part][key] = prepare._absolute(data[part][key], base)
    if "path" in data["matrix"]:
        data["matrix"]["path"] = prepare._absolute(data["matrix"]["path"], base)
    else:
        for cell in data["matrix"]["cells"]:
            cell["serving"]["model"] = prepare._absolute(cell["serving"]["model"], base)
    return type(campaign).model_validate(data)


def _wrap(monkeypatch: pytest.MonkeyPatch, target: str, after: Callable[..., Any]) -> None:
    """Replace `target` with a call to it whose result `after(result, *args, **kwargs)` changes."""
    module_name, _, name = target.rpartition(".")
    module = importlib.import_module(module_name)
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *args, **kwargs: after(original(*args, **kwargs), *args, **kwargs))


def _revert(item: str, mp: pytest.MonkeyPatch) -> Any:
    """Put back the behaviour before the item's fix; a context that drops a contract's check, or None."""
    if item == "every listed shape benched":
        _wrap(mp, "services.bench.planning.staging.shape_specs", lambda specs, *a, **k: specs[:1])
    elif item == "workload_shape tied to the prompt source":
        from services.shared import campaign_checks

        # One check, which submit and the bench planner both make (services/shared/campaign_checks.py).
        mp.setattr(campaign_checks, "CHECKS", tuple(
            check for check in campaign_checks.CHECKS if check is not campaign_checks.workload_shape_problems))

        def label(identity: dict, cell: Any, *a: Any, **k: Any) -> dict:
            return {**identity, "workload_shape": cell.workload_shape or "corpus-heldout"}

        _wrap(mp, "services.bench.planning.builder._identity", label)
    elif item == "unknown --input names refused":
        mp.setattr("services.app.runs.ops.input_problem", lambda step, names: None)
        mp.setattr("contracts.events.input_problem", lambda step, names: None)
    elif item == "Kubernetes templates refused on other schedulers":
        return dropped(Campaign, "_check_kubernetes_templates")
    elif item == "relative paths in matrix.path resolved":
        mp.setattr("services.app.campaign.prepare.absolutize", _old_absolutize)
    elif item == "burstiness without request_rate consumed or refused":
        from services.bench import trial

        window_spec = trial._window_spec

        def reset(plan: Any, *args: Any, **kwargs: Any) -> Any:  # the old reset to 1.0 without a rate
            if plan.load.request_rate is None:
                plan = plan.model_copy(update={"load": plan.load.model_copy(update={"burstiness": 1.0})})
            return window_spec(plan, *args, **kwargs)

        mp.setattr(trial, "_window_spec", reset)
        return dropped(LoadSpec, "_check_arrivals")
    elif item == "min_trials: 1 consumed or refused":
        return dropped(GateSpec, "_check_min_trials")
    elif item == "min_trials below 3 only in an exploratory matrix":
        return dropped(Campaign, "_check_gate_trials")
    elif item == "exploratory consumed or refused":
        def draft(plan: Any, campaign: Any, matrix: Any, *a: Any, **k: Any) -> Any:
            return plan.model_copy(update={"draft": matrix.exploratory and any(c.trials < 3 for c in matrix.cells)})

        _wrap(mp, "services.bench.planning.builder.build_plan", draft)
    elif item == "training-input hash checks":
        mp.setattr("services.trainer_proxy.planning.staging.check_provenance", lambda *a, **k: None)
    elif item == "latency-only gate objective":
        return dropped(GateSpec, "_check_objective")
    elif item == "gate.guards":
        mp.setattr(importlib.import_module("services.gate.decide"), "parse_guards", lambda guards: [])
    elif item == "node in the trial identity":
        _wrap(mp, "services.bench.trial._identity", lambda ident, *a, **k: ident.model_copy(update={"node": None}))
    else:
        raise AssertionError(f"no revert for item {item!r}: add one here")
    return None


@pytest.mark.parametrize("item", list(ITEMS))
def test_the_item_fails_when_its_fix_is_reverted(item, fresh, monkeypatch):
    assert not ITEMS[item](fresh), f"{item!r} must hold before its fix is reverted"
    fresh.forget()
    with _revert(item, monkeypatch) or contextlib.nullcontext():
        problems = ITEMS[item](fresh)
    assert problems, f"the guard's case for {item!r} still passes with its fix reverted"
