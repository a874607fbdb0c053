"""Speedup predicted from measured acceptance and the draft's cost, where speculation stops paying, and the
campaign's ngram settings beside the profile's advice. Pure functions of `CampaignData` (and of numbers).

predicted = L / (1 + k * c) per candidate and level, beside realized = TPOT(baseline) / TPOT(candidate);
c is the draft's measured relative cost (training/draft-cost.json), 0 for ngram and suffix (no model
forward), and without it there is no prediction (docs/publisher.md#predicted-and-realized-speedup)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from contracts import layout
from contracts.artifacts.profile import NgramAdvice
from contracts.artifacts.report import NgramSettingsFigure, SpeedupFigure, StopsPayingFigure
from contracts.campaign import Matrix, SpeculativeConfig
from services.publisher.report.figures import acceptance, baseline_of, spread
from services.publisher.report.model import ArmLevel, CampaignData
from services.shared.formatting import concurrency

# Methods whose proposer runs no model forward: their draft cost is 0.
MODEL_FREE = frozenset({"ngram", "suffix"})
NGRAM_FIELDS = ("num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max")
FIELD_LABEL = {"num_speculative_tokens": "k", "prompt_lookup_min": "prompt_lookup_min",
               "prompt_lookup_max": "prompt_lookup_max"}


def predicted_speedup(mean_length: float, k: int, cost: float) -> float:
    """L / (1 + k * c)."""
    return mean_length / (1 + k * cost)


@dataclass(frozen=True)
class Prediction:
    """One candidate at one level: the prediction from acceptance and cost beside the realized speedup."""

    arm: ArmLevel
    method: str
    k: int
    mean_length: float | None  # None: no trial proposed a draft
    cost: float | None  # None: not measured
    cost_source: str
    predicted: float | None
    realized: float | None  # None: no TPOT on one side


def draft_cost_of(method: str, data: CampaignData) -> tuple[float | None, str]:
    """(c, where it comes from) for a candidate's method."""
    if method in MODEL_FREE:
        return 0.0, "a lookup over the context runs no model forward"
    if method == "draft_model":
        if data.draft_cost is not None:
            return data.draft_cost.relative_cost, layout.TRAINING_DRAFT_COST
        return None, "draft cost not measured" + (f" ({data.draft_cost_note})" if data.draft_cost_note else "")
    return None, f"draft cost not measured (no cost measure for {method})"


def realized(data: CampaignData, arm: ArmLevel) -> float | None:
    base = baseline_of(data, arm)
    cand, ref = spread(arm.trials, "tpot_ms"), spread(base.trials, "tpot_ms") if base else None
    return ref.mean / cand.mean if cand is not None and ref is not None else None


def predictions(data: CampaignData) -> list[Prediction]:
    """Every speculative candidate arm with trials, in arm order."""
    declared = cell_speculation(data)
    out = []
    for arm in data.arms:
        spec = arm.identity.serving_config.speculative if arm.identity else declared.get(arm.cell_id)
        if arm.role != "candidate" or spec is None or not arm.trials:
            continue
        acc = acceptance(arm)
        cost, source = draft_cost_of(spec.method, data)
        k = spec.num_speculative_tokens
        predicted = predicted_speedup(acc.mean_length, k, cost) if acc is not None and cost is not None else None
        out.append(Prediction(arm=arm, method=spec.method, k=k, mean_length=acc.mean_length if acc else None,
                              cost=cost, cost_source=source, predicted=predicted, realized=realized(data, arm)))
    return out


# --- where speculation stops paying ------------------------------------------------


@dataclass(frozen=True)
class StopsPaying:
    cell_id: str
    level: int | None  # the level it stops paying at; None when it does not stop within the levels
    stops: bool
    verdict: str  # stops | pays_everywhere | pays_nowhere | pays_from | unmeasured
    text: str


def stops_paying(cell_id: str, levels: Sequence[tuple[int | None, float | None]]) -> StopsPaying:
    """From (level, realized speedup) pairs: the lowest level with speedup <= 1 after one with > 1."""
    measured = sorted(((lvl, s) for lvl, s in levels if s is not None), key=lambda p: (p[0] is None, p[0] or 0))
    skipped = [lvl for lvl, s in levels if s is None]
    note = f" (no realized speedup at {', '.join(concurrency(v) for v in skipped)})" if skipped else ""
    if not measured:
        return StopsPaying(cell_id, None, False, "unmeasured", "no realized speedup at any level" + note)
    paid = False
    for lvl, s in measured:
        if s > 1:
            paid = True
        elif paid:
            return StopsPaying(cell_id, lvl, True, "stops",
                               f"stops paying at concurrency {concurrency(lvl)} (realized {s:.3f}x after a level "
                               "above 1x)" + note)
    paying = [lvl for lvl, s in measured if s > 1]
    if len(paying) == len(measured):
        return StopsPaying(cell_id, None, False, "pays_everywhere", "pays at every measured level" + note)
    if not paying:
        return StopsPaying(cell_id, None, False, "pays_nowhere", "pays at no measured level" + note)
    return StopsPaying(cell_id, None, False, "pays_from",
                       f"pays from concurrency {concurrency(paying[0])} up, not below; it does not stop paying "
                       "within the measured levels" + note)


def stops_paying_all(found: Sequence[Prediction]) -> list[StopsPaying]:
    cells: dict[str, list[tuple[int | None, float | None]]] = {}
    for p in found:
        cells.setdefault(p.arm.cell_id, []).append((p.arm.concurrency, p.realized))
    return [stops_paying(cell, levels) for cell, levels in cells.items()]


# --- ngram settings: campaign beside the profile's advice ---------------------------


@dataclass(frozen=True)
class NgramComparison:
    cell_id: str
    campaign: tuple[int, int | None, int | None]  # k, prompt_lookup_min, prompt_lookup_max
    advice: tuple[int | None, int | None, int | None] | None  # None: no advice at all
    agree: bool | None  # None: nothing to compare with
    differing: tuple[str, ...]
    sentence: str


def compare_ngram(
    cell_id: str, spec: SpeculativeConfig, advice: NgramAdvice | None, note: str | None
) -> NgramComparison:
    mine = (spec.num_speculative_tokens, spec.prompt_lookup_min, spec.prompt_lookup_max)
    if advice is None:
        return NgramComparison(cell_id, mine, None, None, (), f"no advice to compare with: {note or 'no profile'}")
    theirs = (advice.num_speculative_tokens, advice.prompt_lookup_min, advice.prompt_lookup_max)
    if advice.num_speculative_tokens is None:
        return NgramComparison(cell_id, mine, theirs, None, (),
                               f"the profile gives no ngram settings: {advice.reasons[0]}")
    differing = tuple(f for f, a, b in zip(NGRAM_FIELDS, mine, theirs, strict=True) if a != b)
    if not differing:
        return NgramComparison(cell_id, mine, theirs, True, (), "agree")
    parts = [f"{FIELD_LABEL[f]} (campaign {_setting(a)}, advice {b})"
             for f, a, b in zip(NGRAM_FIELDS, mine, theirs, strict=True) if f in differing]
    return NgramComparison(cell_id, mine, theirs, False, differing, "differ in " + ", ".join(parts))


def ngram_comparisons(data: CampaignData) -> list[NgramComparison]:
    """Every ngram candidate cell of the campaign beside the profile's advice, in cell order."""
    declared = cell_speculation(data)
    roles = {arm.cell_id: arm.role for arm in data.arms} | _declared_roles(data)
    return [compare_ngram(cell, spec, data.ngram_advice, data.ngram_advice_note)
            for cell, spec in declared.items()
            if spec is not None and spec.method == "ngram" and roles.get(cell) == "candidate"]


def cell_speculation(data: CampaignData) -> dict[str, SpeculativeConfig | None]:
    """cell -> declared speculation: the campaign's inline matrix, else the bench plan, else the trials' identity."""
    if data.campaign is not None and isinstance(data.campaign.matrix, Matrix):
        return {c.cell_id: c.serving.speculative for c in data.campaign.matrix.cells}
    out: dict[str, SpeculativeConfig | None] = {}
    for cell in (data.plan or {}).get("cells") or []:
        if isinstance(cell, dict) and isinstance(cell.get("cell_id"), str):
            out[cell["cell_id"]] = _spec(cell.get("speculative_config"))
    for arm in data.arms:
        if arm.cell_id not in out and arm.identity is not None:
            out[arm.cell_id] = arm.identity.serving_config.speculative
    return out


def _declared_roles(data: CampaignData) -> dict[str, str | None]:
    if data.campaign is not None and isinstance(data.campaign.matrix, Matrix):
        return {c.cell_id: c.role for c in data.campaign.matrix.cells}
    return {c["cell_id"]: c.get("role") for c in (data.plan or {}).get("cells") or []
            if isinstance(c, dict) and isinstance(c.get("cell_id"), str)}


def _spec(raw: object) -> SpeculativeConfig | None:
    if not isinstance(raw, dict):
        return None
    try:
        return SpeculativeConfig.model_validate(raw)
    except ValidationError:
        return None


def _setting(v: int | None) -> str:
    return "not set" if v is None else str(v)


# --- report.json ---------------------------------------------------------------------


def report_figures(data: CampaignData) -> dict[str, Any]:
    """The prediction fields of report.json (contracts.artifacts.report.ReportSummary)."""
    found = predictions(data)
    speedups = [SpeedupFigure(
        cell_id=p.arm.cell_id, concurrency=p.arm.concurrency, method=p.method, num_speculative_tokens=p.k,
        mean_acceptance_length=p.mean_length, relative_draft_cost=p.cost, predicted=p.predicted, realized=p.realized,
        note=p.cost_source if p.mean_length is not None else "no drafts in the trials: no acceptance length",
    ) for p in found]
    stops = [StopsPayingFigure(cell_id=s.cell_id, stops_at=s.level, verdict=s.verdict, finding=s.text)
             for s in stops_paying_all(found)]
    ngram = [NgramSettingsFigure(
        cell_id=c.cell_id, num_speculative_tokens=c.campaign[0], prompt_lookup_min=c.campaign[1],
        prompt_lookup_max=c.campaign[2], advised_num_speculative_tokens=c.advice[0] if c.advice else None,
        advised_prompt_lookup_min=c.advice[1] if c.advice else None,
        advised_prompt_lookup_max=c.advice[2] if c.advice else None, agree=c.agree, differing=list(c.differing),
        comparison=c.sentence,
    ) for c in ngram_comparisons(data)]
    cost = data.draft_cost.relative_cost if data.draft_cost is not None else None
    return {"speedups": speedups, "stops_paying": stops, "ngram_settings": ngram, "draft_relative_cost": cost}
