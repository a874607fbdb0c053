"""The end of the report's last section (the next measured lever): a k per concurrency, predicted, written as vLLM's
`num_speculative_tokens_per_batch_size`, with the predicted TPOT per level against the best fixed k and
the exact candidate cells (campaign YAML) that prove or reject it (schedule_plan.py; docs/publisher.md,
"A k per concurrency")."""

from __future__ import annotations

import yaml

from services.publisher.prediction.schedule_plan import CandidatePlan, best, candidate_plans, proposed_cells
from services.publisher.report.document import Block, Bullets, Formula, Paragraph, Ref, Section, Table
from services.publisher.report.levers import gate_text
from services.publisher.report.model import CampaignData
from services.shared.formatting import concurrency, ms, percent

TITLE = "A k per concurrency: the schedule, predicted"
MODEL = (
    "S_l(j) = L_l(j) / (1 + j * c_l)     L_l(j) = 1 + a_1 + ... + a_j (measured at level l), S_l(0) = 1",
    "c_l    = (L_l(k) / realized_l - 1) / k   cost per drafted token measured at level l (k: the measured k)",
    "best k at l = argmax_j S_l(j)       best fixed k = argmax_j geomean_l S_l(j)",
    "TPOT_l(j) = TPOT_l(baseline) / S_l(j)",
)


def with_schedule(levers: Section, data: CampaignData) -> Section:
    """The levers' section with the schedule's blocks at its end: the report ends with it."""
    return Section(levers.id, levers.title, (*levers.blocks, *schedule_blocks(data)))


def schedule_blocks(data: CampaignData) -> list[Block]:
    plans = candidate_plans(data)
    blocks: list[Block] = [
        Paragraph((f"{TITLE}. For each speculative candidate, the k that maximises the predicted speedup at each "
                   "measured concurrency, from its measured acceptance per position and its measured cost per level, "
                   "written as vLLM's num_speculative_tokens_per_batch_size ([[start_bs, end_bs, k], ...], inclusive "
                   "ranges from batch size 1; level l's k covers batch sizes above the previous level up to l). "
                   "A draft cut to j tokens keeps a_1..a_j; the step's cost is taken as linear in k; no k above the "
                   "measured one is predicted. A prediction, not a measurement: the cells at the end prove or "
                   "reject it.",)),
        Formula(MODEL),
    ]
    if not plans:
        blocks.append(Paragraph(("No speculative candidate without a schedule has spec-decode counters and a "
                                 "measured cost at any level: there is no schedule to predict.",)))
        return blocks
    blocks.append(_table(plans))
    blocks.append(Bullets(tuple((_summary(p),) for p in plans)))
    blocks += _proof(data, best(plans))  # type: ignore[arg-type]  # plans is not empty: best() finds one
    return blocks


def _table(plans: list[CandidatePlan]) -> Table:
    rows = []
    for p in plans:
        for arm, lv, k, own in zip(p.arms, p.plan.levels, p.plan.chosen, p.measured_tpot_ms, strict=True):
            fixed = p.plan.fixed_k
            rows.append((
                Ref(arm.key), p.cell_id, concurrency(lv.concurrency), ", ".join(f"{a:.2f}" for a in lv.per_position),
                f"{lv.cost:.3f} ({lv.cost_source})", str(p.spec.num_speculative_tokens), ms(own), str(k),
                f"{lv.speedup(k):.3f}x", ms(lv.tpot_ms(k)), str(fixed), ms(lv.tpot_ms(fixed)),
            ))
    return Table(("ID", "candidate", "concurrency", "a_1..a_k", "c_l (cost per drafted token)", "measured k",
                  "measured TPOT", "best k", "predicted speedup at best k", "predicted TPOT at best k",
                  "best fixed k", "predicted TPOT at best fixed k"), tuple(rows))


def _summary(p: CandidatePlan) -> str:
    schedule = [list(r) for r in p.plan.schedule]
    if not any(p.plan.chosen):
        return (f"{p.cell_id}: no k of 1..{p.plan.k_max} is predicted to beat the standing cell at any measured "
                f"level (schedule {schedule}: drafts nothing)")
    kind = "varies with concurrency" if p.plan.varies else f"is one k ({p.plan.chosen[0]}): a fixed k"
    return (f"{p.cell_id}: num_speculative_tokens_per_batch_size {schedule} ({kind}); best fixed k "
            f"{p.plan.fixed_k}; predicted speedup over the standing cell {p.predicted_gain:.3f}x (geometric mean), "
            f"{percent((p.plan.gain - 1) * 100)} over the best fixed k")


def _proof(data: CampaignData, chosen: CandidatePlan) -> list[Block]:
    if not any(chosen.plan.chosen):
        return [Paragraph((f"The schedule: none. No candidate's k is predicted to pay at any measured level; the "
                           f"standing config stands (best candidate {chosen.cell_id}).",))]
    cells = proposed_cells(data, chosen)
    if not chosen.plan.varies:  # one k everywhere: the schedule is that fixed k, proven by its cell alone
        snippet = _yaml([cells["fixed"]])
        return [
            Paragraph((f"The schedule: {chosen.cell_id} runs one k, {chosen.plan.fixed_k}, at every measured level: "
                       "no schedule beats it, so the lever is that fixed k. The candidate cell that proves or rejects "
                       f"it, benched beside the standing cell in a new run (`specdec next {data.run_id}`):",)),
            Formula(snippet),
            Paragraph((gate_text(data),)),
        ]
    snippet = _yaml([cells["fixed"], cells["scheduled"]])
    fixed_id, sched_id = cells["fixed"]["cell_id"], cells["scheduled"]["cell_id"]
    schedule = cells["scheduled"]["serving"]["speculative"]["num_speculative_tokens_per_batch_size"]
    return [
        Paragraph((f"The schedule: {chosen.cell_id} with num_speculative_tokens_per_batch_size {schedule} "
                   f"(num_speculative_tokens {chosen.scheduled_k}), predicted {percent((chosen.plan.gain - 1) * 100)} "
                   f"over its best fixed k {chosen.plan.fixed_k}. The candidate cells that prove or reject it, "
                   f"benched beside the standing cell in a new run (`specdec next {data.run_id}` writes that "
                   "campaign; it reuses this run's target, draft and corpus and pools no trial with this run):",)),
        Formula(snippet),
        Paragraph((gate_text(data) + " The new run's gate decides each cell against the standing cell; the "
                   f"schedule against the fixed k is decided by the same gate with {fixed_id} as the baseline:",)),
        Formula((f"specdec gate --baseline 'BUNDLES/NEXT_RUN/bench/{fixed_id}/trial-*/result-*.json' \\",
                 f"  --candidate '{sched_id}=BUNDLES/NEXT_RUN/bench/{sched_id}/trial-*/result-*.json' \\",
                 f"  {_gate_flags(data)}")),
        Paragraph((f"promoted: the schedule is proven against the fixed k; rejected or inconclusive: {fixed_id} "
                   "stands.",)),
    ]


def _yaml(cells: list[dict]) -> tuple[str, ...]:
    return tuple(yaml.safe_dump({"cells": cells}, sort_keys=False, default_flow_style=None,
                                width=100).rstrip().splitlines())


def _gate_flags(data: CampaignData) -> str:
    """The campaign's gate spec as `specdec gate` flags."""
    spec = data.decision.gate if data.decision else (data.campaign.gate if data.campaign else None)
    if spec is None:
        return "--objective tpot --acceptance-floor 0"
    flags = [f"--objective {spec.objective or 'tpot'}", f"--min-trials {spec.min_trials}"]
    for flag, value in (("--acceptance-floor", spec.acceptance_floor),
                        ("--acceptance-length-floor", spec.acceptance_length_floor),
                        ("--accuracy-floor", spec.accuracy_floor)):
        if value is not None and not (flag == "--acceptance-length-floor" and spec.acceptance_floor is not None):
            flags.append(f"{flag} {value:g}")  # the two acceptance floors are one choice on the command line
    return " ".join(flags)
