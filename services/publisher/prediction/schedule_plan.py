"""A k per concurrency for each speculative candidate of a run, from its measured counters and TPOTs
(the model: services/shared/schedule.py; docs/publisher.md, "A k per concurrency"), and the cells that
prove or reject it: the scheduled cell and the best fixed k, as campaign cells. Pure: a function of
`CampaignData`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.artifacts.report import ScheduleFigure, ScheduleLevelFigure
from contracts.campaign import Cell, Matrix, SpeculativeConfig
from services.publisher.prediction.predict import cell_speculation, draft_cost_of, realized
from services.publisher.report.figures import acceptance, baseline_of, spread
from services.publisher.report.model import ArmLevel, CampaignData
from services.shared.schedule import Level, Plan, cost_from_realized, plan

REALIZED_SOURCE = "(L(k) / realized - 1) / k at this level"


@dataclass(frozen=True)
class CandidatePlan:
    """One candidate's schedule, the arms it rests on, and the cells that test it."""

    cell_id: str
    spec: SpeculativeConfig
    plan: Plan
    arms: tuple[ArmLevel, ...]  # in the plan's level order
    measured_tpot_ms: tuple[float | None, ...]  # the candidate's own TPOT per level (at its measured k)

    @property
    def predicted_gain(self) -> float:
        """Geometric-mean predicted speedup over the standing cell under the schedule."""
        values = [lv.speedup(k) for lv, k in zip(self.plan.levels, self.plan.chosen, strict=True)]
        product = 1.0
        for v in values:
            product *= v
        return product ** (1 / len(values))

    @property
    def scheduled_k(self) -> int:
        """num_speculative_tokens of the scheduled cell: the largest k its schedule runs (at least 1)."""
        return max(1, *self.plan.chosen)


def candidate_plans(data: CampaignData) -> list[CandidatePlan]:
    """Every speculative candidate with counters at one level or more, in cell order."""
    declared = cell_speculation(data)
    out = []
    for cell in data.cells():
        levels, arms, tpots = [], [], []
        spec: SpeculativeConfig | None = None
        for arm in data.arms:
            if arm.cell_id != cell or arm.role != "candidate":
                continue
            spec = arm.identity.serving_config.speculative if arm.identity else declared.get(cell)
            found = _level(data, arm, spec)
            if found is not None:
                levels.append(found)
                arms.append(arm)
                own = spread(arm.trials, "tpot_ms")
                tpots.append(own.mean if own else None)
        if spec is None or not levels:
            continue
        if spec.num_speculative_tokens_per_batch_size:
            continue  # a scheduled cell's counters mix its ks: no single k to extrapolate from
        found_plan = plan(levels)  # orders the levels: arms and TPOTs follow that order
        by_level = {lv.concurrency: (a, t) for lv, a, t in zip(levels, arms, tpots, strict=True)}
        out.append(CandidatePlan(
            cell_id=cell, spec=spec, plan=found_plan,
            arms=tuple(by_level[lv.concurrency][0] for lv in found_plan.levels),
            measured_tpot_ms=tuple(by_level[lv.concurrency][1] for lv in found_plan.levels),
        ))
    return out


def best(plans: list[CandidatePlan]) -> CandidatePlan | None:
    """The candidate whose schedule predicts the most (geometric mean over its levels)."""
    return max(plans, key=lambda p: p.predicted_gain) if plans else None


def _level(data: CampaignData, arm: ArmLevel, spec: SpeculativeConfig | None) -> Level | None:
    acc = acceptance(arm)
    if spec is None or acc is None:
        return None
    base = baseline_of(data, arm)
    base_tpot = spread(base.trials, "tpot_ms") if base else None
    seen = realized(data, arm)
    if seen is not None and seen > 0:
        cost, source = cost_from_realized(acc.per_position, seen), REALIZED_SOURCE
    else:
        static, why = draft_cost_of(spec.method, data)
        if static is None:
            return None
        cost, source = static, f"{why} (no realized speedup at this level: verification cost left out)"
    return Level(concurrency=arm.concurrency, per_position=acc.per_position, cost=cost, cost_source=source,
                 baseline_tpot_ms=base_tpot.mean if base_tpot else None)


# --- the cells that prove or reject it ----------------------------------------------------


def proposed_cells(data: CampaignData, found: CandidatePlan) -> dict[str, dict[str, Any]]:
    """{"fixed": the best fixed k's cell, "scheduled": the scheduled cell}, as campaign cells (JSON-able
    dicts, valid `Cell`s): the candidate's declared cell with its speculation changed, and a new cell_id."""
    source = _declared_cell(data, found.cell_id)
    levels = sorted({lv.concurrency for lv in found.plan.levels if lv.concurrency is not None})
    # The declared speculation (a trained draft stays '{training.output}'), else what the trials ran.
    spec = (source.get("serving") or {}).get("speculative") or found.spec.model_dump(mode="json", exclude_none=True)
    fixed = {**spec, "num_speculative_tokens": found.plan.fixed_k}
    k = found.scheduled_k
    scheduled = {**spec, "num_speculative_tokens": k,
                 "num_speculative_tokens_per_batch_size": [[a, b, min(c, k)] for a, b, c in found.plan.schedule]}
    out = {}
    for name, suffix, speculative in (("fixed", f"k{found.plan.fixed_k}", fixed), ("scheduled", "sched", scheduled)):
        cell = dict(source)
        cell.update(cell_id=_cell_id(found.cell_id, suffix), role="candidate",
                    concurrency=levels or cell.get("concurrency") or [1])
        cell["serving"] = {**cell.get("serving", {}), "speculative": speculative}
        out[name] = Cell.model_validate(cell).model_dump(mode="json", exclude_none=True)
    return out


def _declared_cell(data: CampaignData, cell_id: str) -> dict[str, Any]:
    if data.campaign is not None and isinstance(data.campaign.matrix, Matrix):
        for cell in data.campaign.matrix.cells:
            if cell.cell_id == cell_id:
                return cell.model_dump(mode="json", exclude_none=True)
    return {"cell_id": cell_id, "role": "candidate"}


def _cell_id(cell: str, suffix: str) -> str:
    base = cell.rsplit("-k", 1)[0] if cell.rsplit("-k", 1)[-1].isdigit() else cell
    return f"{base}-{suffix}"


def schedule_figures(data: CampaignData) -> list[ScheduleFigure]:
    """The `schedules` of report.json: every candidate's schedule, the proposed one marked chosen."""
    plans = candidate_plans(data)
    top = best(plans)
    return [ScheduleFigure(
        cell_id=p.cell_id, measured_k=p.spec.num_speculative_tokens, schedule=list(p.plan.schedule),
        fixed_k=p.plan.fixed_k, gain_over_fixed_pct=(p.plan.gain - 1) * 100, chosen=p is top and any(p.plan.chosen),
        levels=[ScheduleLevelFigure(
            concurrency=lv.concurrency, cost=lv.cost, cost_source=lv.cost_source, best_k=k,
            predicted_speedup=lv.speedup(k), measured_tpot_ms=own, predicted_tpot_ms=lv.tpot_ms(k),
            predicted_fixed_tpot_ms=lv.tpot_ms(p.plan.fixed_k),
        ) for lv, k, own in zip(p.plan.levels, p.plan.chosen, p.measured_tpot_ms, strict=True)],
    ) for p in plans]
