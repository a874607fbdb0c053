"""The report's sections on prediction: the draft model and its cost, predicted speedup (free drafting,
figures.py; with the draft's cost, predict.py) beside the realized one, where speculation stops paying,
and the campaign's ngram settings beside the profile's advice.

Tables of measured numbers start with the identity pointer (`Ref`) like every other such table
(report/sections.py); tables of declared settings name the cell and point to its arms.
"""

from __future__ import annotations

from contracts import layout
from services.publisher.prediction.predict import (
    Prediction,
    cell_speculation,
    ngram_comparisons,
    predictions,
    stops_paying_all,
)
from services.publisher.report import figures as fig
from services.publisher.report.document import (
    Block,
    Bullets,
    Formula,
    Image,
    Paragraph,
    Ref,
    Section,
    Table,
    Text,
)
from services.publisher.report.model import CampaignData
from services.publisher.report.pointers import id_cols
from services.shared.formatting import MISSING, concurrency, joined, number, share

SPEEDUP_FORMULA = (
    "a_i = accepted tokens at draft position i / drafts        (pooled over the level's trials)",
    "p_i = a_i / a_(i-1), a_0 = 1                               (acceptance at i given i-1)",
    "predicted = tau = 1 + sum_i a_i                            "
    "(tokens per target step; free drafting, one-step verify)",
    "realized  = TPOT(baseline) / TPOT(candidate)               (geometric means of per-trial median TPOT, same level)",
    "efficiency = realized / predicted; overhead = predicted / realized - 1 (extra cost of a speculative step)",
)
COST_FORMULA = (
    "predicted = L / (1 + k * c)            "
    "L = 1 + accepted / drafts (pooled over the level's trials), k = tokens per draft",
    "c = draft ms per token / target ms per token   (draft_model: training/draft-cost.json; ngram, suffix: 0)",
    "realized  = TPOT(baseline) / TPOT(candidate)    (geometric means of per-trial median TPOT, same level)",
)


def speedup_section(data: CampaignData, plot: Image | None) -> Section:
    found = fig.speedups(data)
    rows = tuple((*id_cols(s.candidate), Ref(s.baseline.key), f"{s.predicted:.3f}x", f"{s.realized:.3f}x",
                  share(s.efficiency), f"{s.overhead:+.3f}") for s in found)
    blocks: list[Block] = [Formula(SPEEDUP_FORMULA)]
    if rows:
        blocks.append(Table(("ID", "cell", "concurrency", "trials", "named baseline", "baseline ID", "predicted",
                             "realized", "efficiency", "overhead per step"), rows))
    else:
        blocks.append(Paragraph(("No candidate has both spec-decode counters and a baseline TPOT at the same level.",)))
    blocks += [plot] if plot is not None else []
    blocks += speedup_with_cost_blocks(data)
    return Section("speedup", "Predicted speedup from measured acceptance beside the realized one", tuple(blocks))


def speedup_with_cost_blocks(data: CampaignData) -> list[Block]:
    """Blocks appended to the speedup section: the prediction with the draft's cost beside the realized speedup."""
    found = predictions(data)
    blocks: list[Block] = [
        Paragraph(("With the draft's cost: one speculative step costs one target forward (the k drafts verified "
                   "together) plus k draft forwards of relative cost c each, and yields L tokens. For ngram (and "
                   "suffix) c = 0: a prompt lookup costs no model forward, so the prediction is tau. For draft_model, "
                   f"c is the draft's measured per-token cost ({layout.TRAINING_DRAFT_COST}); without that file the "
                   "draft cost is not measured and no prediction is given.",)),
        Formula(COST_FORMULA),
    ]
    if not found:
        blocks.append(Paragraph(("No speculative candidate has trials.",)))
        return blocks
    rows = tuple((*id_cols(p.arm), p.method, str(p.k), _x(p.mean_length, "no drafts", plain=True),
                  _cost(p), _predicted(p), _x(p.realized, "no TPOT to compare"), _ratio(p)) for p in found)
    blocks.append(Table(("ID", "cell", "concurrency", "trials", "named baseline", "method", "k",
                         "L (mean acceptance length)", "c (draft cost per token)", "predicted L / (1 + k c)",
                         "realized", "realized / predicted"), rows))
    return blocks


def stops_paying_section(data: CampaignData) -> Section:
    title = "Where speculation stops paying"
    found = predictions(data)
    if not found:
        return Section("stops-paying", title, (Paragraph(("No speculative candidate has trials.",)),))
    rows = []
    for stop in stops_paying_all(found):
        arms = [p for p in found if p.arm.cell_id == stop.cell_id]
        per_level = "; ".join(f"{concurrency(p.arm.concurrency)}: {_x(p.realized, MISSING)}" for p in
                              sorted(arms, key=lambda p: (p.arm.concurrency is None, p.arm.concurrency or 0)))
        rows.append((joined([Ref(p.arm.key) for p in arms]), stop.cell_id, per_level,
                     concurrency(stop.level) if stop.stops else MISSING, stop.text))
    return Section("stops-paying", title, (
        Paragraph(("Per candidate, the realized speedup at each measured level in ascending concurrency, and the "
                   "lowest level at which it is <= 1x after a level where it was above 1x.",)),
        Table(("ID", "candidate", "realized speedup per level", "stops paying at", "finding"), tuple(rows)),
    ))


def ngram_settings_section(data: CampaignData) -> Section:
    title = "Ngram settings: campaign vs profiler advice"
    found = ngram_comparisons(data)
    if not found:
        return Section("ngram-settings", title, (Paragraph(("The campaign has no ngram candidate.",)),))
    rows = tuple((c.cell_id, _refs(data, c.cell_id), *(_setting(v) for v in c.campaign),
                  *((_setting(v) for v in c.advice) if c.advice else (MISSING,) * 3), c.sentence) for c in found)
    blocks: list[Block] = [
        Paragraph((f"Each ngram candidate's k, prompt_lookup_min and prompt_lookup_max beside the profile's "
                   f"ngram_advice ({layout.PROFILE}; rules in docs/profiler.md). They agree when all three are equal. "
                   "The advice is derived from the traffic's reuse; the measured figures above decide.",)),
        Table(("cell", "arms", "k", "prompt_lookup_min", "prompt_lookup_max", "advised k", "advised min",
               "advised max", "comparison"), rows, identity_column=False),
    ]
    advice = data.ngram_advice
    if advice is not None:
        estimate = share(advice.estimated_acceptance)
        blocks.append(Paragraph((f"Profiler's estimated acceptance (an estimate, not a promise): {estimate}. "
                                 "Its reasons:",)))
        blocks.append(Bullets(tuple((r,) for r in advice.reasons)))
    return Section("ngram-settings", title, tuple(blocks))


def suffix_prediction_section(data: CampaignData) -> Section:
    """Each suffix cell's acceptance as the profiler predicted it offline, beside what its arms served."""
    title = "Suffix decoding: predicted vs served acceptance"
    cells = [c for c, spec in cell_speculation(data).items() if spec is not None and spec.method == "suffix"]
    if not cells:
        return Section("suffix-prediction", title, (Paragraph(("The campaign has no suffix candidate.",)),))
    found = data.suffix_prediction
    predicted = {c.cell_id: c for c in found.cells} if found is not None else {}
    rows = []
    for arm in (a for a in data.arms if a.cell_id in cells):
        p, served = predicted.get(arm.cell_id), fig.acceptance(arm)
        rows.append((Ref(arm.key), arm.cell_id, concurrency(arm.concurrency),
                     share(p.acceptance_rate) if p else MISSING,
                     number(p.mean_acceptance_length, ".2f") if p else MISSING,
                     share(served.rate) if served else "no drafts",
                     f"{served.mean_length:.2f}" if served else MISSING,
                     f"{served.draft_tokens / served.drafts:.2f}" if served else MISSING))
    why = (found.unavailable_reason if found is not None else data.suffix_prediction_note) or ""
    blocks: list[Block] = [Paragraph((
        f"The profiler replays the corpus's heldout prompts with their reference completions through "
        f"arctic-inference's suffix-decoding simulator ({layout.PROFILE_SUFFIX}; "
        f"{found.package if found and found.package else 'no package'}), configured as each cell declares, and "
        "counts what vLLM's spec-decode counters count. One pass with the traffic's own completions and a cold "
        "cache: the served arms decode the target's outputs and see the bench's repeated prompts. The prediction "
        "is advice; the gate decides on the served figures only.",))]
    if why:
        blocks.append(Paragraph((f"No prediction: {why}.",)))
    blocks.append(Table(("arm", "cell", "concurrency", "predicted acceptance", "predicted mean length",
                         "served acceptance", "served mean length", "served draft tokens per draft"), tuple(rows)))
    if found is not None and found.cells:
        blocks.append(Table(
            ("cell", "k", "max_tree_depth", "max_cached_requests", "max_spec_factor", "min_token_prob", "requests",
             "steps", "drafts", "draft tokens", "accepted"),
            tuple((c.cell_id, str(c.num_speculative_tokens), str(c.max_tree_depth), str(c.max_cached_requests),
                   f"{c.max_spec_factor:g}", f"{c.min_token_prob:g}", str(c.requests), str(c.steps), str(c.drafts),
                   str(c.draft_tokens), str(c.accepted_tokens)) for c in found.cells),
            identity_column=False))
    return Section("suffix-prediction", title, tuple(blocks))


def training_section(data: CampaignData) -> Section:
    title = "Training: the draft model and its cost"
    step = next((s for s in data.steps if s.step == "training"), None)
    lines: list[Text] = [(f"training step: {step.state if step else 'missing'}"
                          + (f" ({step.detail})" if step and step.detail else ""),)]
    if data.draft_reused_from:
        lines.append((f"draft model reused from run {data.draft_reused_from} (identical training inputs, key "
                      f"{data.draft_input_key or 'unknown'})",))
    elif data.draft_input_key:
        lines.append((f"draft model trained in this run (training input key {data.draft_input_key})",))
    blocks: list[Block] = [Bullets(tuple(lines))]
    cost = data.draft_cost
    if cost is None:
        blocks.append(Paragraph((f"Draft cost not measured: "
                                 f"{data.draft_cost_note or 'no ' + layout.TRAINING_DRAFT_COST}. "
                                 "No draft_model candidate gets a cost-adjusted prediction.",)))
        return Section("training", title, tuple(blocks))
    blocks.append(Paragraph((f"The draft's per-token forward cost relative to the target's: {cost.relative_cost:.3f} "
                             f"({layout.TRAINING_DRAFT_COST}; both timed on the same batch, medians of interleaved "
                             "repetitions). It is c in the predicted speedup L / (1 + k c).",)))
    blocks.append(Table(
        ("draft ms/token", "target ms/token", "relative cost c", "draft parameters", "target parameters", "batch",
         "repetitions", "threads", "dtype"),
        ((f"{cost.draft_ms_per_token:.4g}", f"{cost.target_ms_per_token:.4g}", f"{cost.relative_cost:.3f}",
          f"{cost.draft_parameters:,}", f"{cost.target_parameters:,}",
          f"{cost.batch_prompts} prompts, {cost.batch_tokens} tokens", str(cost.repetitions), str(cost.threads),
          cost.dtype),),
        identity_column=False,
    ))
    return Section("training", title, tuple(blocks))


# --- helpers -----------------------------------------------------------------------


def _cost(p: Prediction) -> str:
    return p.cost_source if p.cost is None else f"{p.cost:.3f} ({p.cost_source})"


def _predicted(p: Prediction) -> str:
    if p.predicted is not None:
        return f"{p.predicted:.3f}x"
    return "no prediction: no drafts in the trials" if p.mean_length is None else f"no prediction: {p.cost_source}"


def _ratio(p: Prediction) -> str:
    return MISSING if p.predicted is None or p.realized is None else share(p.realized / p.predicted)


def _x(v: float | None, none: str, *, plain: bool = False) -> str:
    return none if v is None else f"{v:.3f}" + ("" if plain else "x")


def _setting(v: int | None) -> str:
    return "not set" if v is None else str(v)


def _refs(data: CampaignData, cell: str) -> Text | str:
    arms = [Ref(a.key) for a in data.arms if a.cell_id == cell]
    return joined(arms) if arms else "no arm in this bundle"
