"""The report's own sections, each built from `CampaignData` (render.py puts them in order).

The DRAFT reasons, summary, steps, identity, engine read-back, rejected trials,
redaction, gate verdicts, latency, throughput, acceptance, speedup (its table is
render_predict.py's) and the next measured lever. Every table of measured numbers
starts with the identity pointer (`Ref` to the arm's row in the identity table) and
repeats the cell, the concurrency, the trial count and the named baseline (services/publisher/report/pointers.py);
every plot's caption points to the identities it draws (`_image`).
"""

from __future__ import annotations

from contracts import layout
from contracts.artifacts.decision import FloorCheck
from contracts.artifacts.engine import CHECKED_FIELDS
from contracts.campaign import ServingConfig
from services.publisher.prediction import render_predict
from services.publisher.report import figures as fig
from services.publisher.report.document import (
    Anchor,
    Block,
    Bullets,
    Image,
    Paragraph,
    Ref,
    Section,
    Table,
    Text,
)
from services.publisher.report.levers import Lever
from services.publisher.report.model import CampaignData
from services.publisher.report.plots import Plot
from services.publisher.report.pointers import arm_ref, id_cols
from services.shared.formatting import MISSING, concurrency, interval, joined, percent

# A guard's result; None (not compared) is neither.
_GUARD_RESULTS: dict[bool | None, str] = {True: "passed", False: "failed"}

# --- sections ----------------------------------------------------------------------


def draft_section(reasons: list[str]) -> Section:
    return Section("draft", "Why this is a DRAFT", (
        Paragraph(("These numbers are not final evidence, because:",)),
        Bullets(tuple((r,) for r in reasons)),
    ))


def summary_section(data: CampaignData) -> Section:
    d, c = data.decision, data.campaign
    lines: list[Text] = [("run: ", data.run_id)]
    if c is not None:
        rev = c.source_revisions
        lines.append((f"family: {c.family}; target: {c.target.checkpoint}",))
        lines.append((f"source revisions: target {rev.target or 'unknown'}, trainer {rev.trainer or 'unknown'}, "
                      f"serving {rev.serving or 'unknown'}, specdec {rev.specdec or 'unknown'}"
                      + (f", suffix decoding {rev.suffix_decoding}" if rev.suffix_decoding else ""),))
    if data.draft_reused_from:
        lines.append((f"draft model: reused from run {data.draft_reused_from}, whose training inputs were identical "
                      f"(training input key {data.draft_input_key or 'unknown'}); nothing was trained in this run",))
    elif data.draft_input_key:
        lines.append((f"draft model: trained in this run (training input key {data.draft_input_key})",))
    if d is not None:
        lines.append((f"decision: {d.decision}" + (f" (winner {d.winner})" if d.winner else "") + f"; objective "
                      f"{d.objective} ({d.direction.replace('_', ' ')}); guards "
                      f"{', '.join(d.gate.guards) or 'none'}; named baseline {d.baseline}",))
        lines.append((f"DECISION.json sha256 {data.decision_sha256}",))
        lines += [(f"gate: {r}",) for r in d.reasons]
    else:
        lines.append((f"decision: none (no valid {layout.DECISION})",))
    levels = ", ".join(concurrency(v) for v in data.levels)
    lines.append((f"cells: {', '.join(data.cells())}; concurrency levels: {levels}; "
                  "identity of every figure above: ", *joined([Ref(a.key) for a in data.arms])))
    return Section("summary", "Summary", (
        Bullets(tuple(lines)),
        Paragraph(("Every measured number below carries its identity: the ID column points to its row in the "
                   "identity table (model, hardware, node, quantization, parallelism, serving config, workload shape, "
                   "concurrency, regime, source revision, trial count, named baseline).",)),
    ))


def steps_section(data: CampaignData) -> Section:
    rows = tuple((s.step, s.state, s.detail or MISSING) for s in data.steps)
    note = () if data.journal_present else (Paragraph((f"The bundle has no {layout.EVENTS} (journal).",)),)
    return Section("steps", "Campaign steps",
                   (Table(("step", "state", "evidence"), rows, identity_column=False), *note))


def identity_section(data: CampaignData) -> Section:
    rows = []
    for arm in data.arms:
        i = arm.identity
        par = f"tp{i.parallelism.tensor_parallel_size} pp{i.parallelism.pipeline_parallel_size} " \
            f"dp{i.parallelism.data_parallel_size}" if i else "unknown"
        rows.append((
            Anchor(arm.key), arm.cell_id, arm.role or "unknown",
            i.model if i else "unknown", i.hardware if i else "unknown", (i.node or "unknown") if i else "unknown",
            (i.quantization or "none") if i else "unknown", par,
            _serving(i.serving_config) if i else "unknown", i.workload_shape if i else "unknown",
            concurrency(arm.concurrency), i.regime if i else "unknown", i.graph_mode if i else "unknown",
            (i.source_revision or "unknown") if i else "unknown",
            f"{len(arm.trials)}/{arm.trials_declared or '?'}", arm.baseline_cell_id or MISSING,
            "; ".join(arm.identity_problems) or "complete",
        ))
    columns = ("ID", "cell", "role", "model", "hardware", "node", "quantization", "parallelism", "serving config",
               "workload shape", "concurrency", "regime", "graph mode", "source revision", "trials (found/declared)",
               "named baseline", "identity check")
    return Section("identity", "Identity of every number", (Table(columns, tuple(rows), identity_column=False),))


def engine_section(data: CampaignData) -> Section:
    rows: list[tuple[str, ...]] = []
    for row in data.engine:
        launch = MISSING if row.launch is None else str(row.launch)
        if row.check is None:
            rows.append((row.cell_id, launch, MISSING, MISSING, "not read back", MISSING, row.path or MISSING))
            continue
        by_field = {c.field: c for c in row.check.checks}
        for name in CHECKED_FIELDS:
            c = by_field.get(name)
            if c is None:
                rows.append((row.cell_id, launch, name, MISSING, "not read back", MISSING, row.path or MISSING))
            else:
                verdict = "UNVERIFIABLE" if c.unverifiable else "ok" if c.ok else "MISMATCH"
                rows.append((row.cell_id, launch, name, _val(c.declared, "not declared"),
                             _val(c.effective, "not reported"), verdict, row.path or MISSING))
    if not rows:
        return Section("engine", "Engine read-back: declared and effective serving config",
                       (Paragraph(("No launch in this bundle.",)),))
    return Section("engine", "Engine read-back: declared and effective serving config", (
        Paragraph(("What each launch's engine reported it runs (its start-up config and /v1/models), beside what the "
                   "cell declared; a mismatch fails the cell. 'not read back': the launch has no read-back, so what "
                   "it served is unverified; 'UNVERIFIABLE': the engine states that declared value nowhere (the "
                   "lookup sizes come from what the API server received), so it is not counted as checked.",)),
        Table(("cell", "launch", "field", "declared", "effective", "check", "read-back file"), tuple(rows),
              identity_column=False),
    ))


def redaction_section(data: CampaignData) -> Section:
    title = "Redaction: what the corpus step replaced, per kind"
    red = data.redaction
    if red is None:
        return Section("redaction", title, (Paragraph(("No corpus in this bundle: nothing was redacted.",)),))
    rows = tuple(
        (kind, red.placeholders.get(kind, MISSING), str(n), str(red.diagnostics_counts.get(kind, 0)))
        for kind, n in sorted(red.counts.items(), key=lambda item: (-item[1], item[0]))
        if n or red.diagnostics_counts.get(kind, 0)
    )
    intro = (f"{red.records_redacted} corpus record(s) held at least one finding; each became its typed placeholder. "
             f"Rule set: {red.ruleset or 'not recorded (an older manifest)'}.")
    if not rows:
        return Section("redaction", title, (Paragraph((intro + " Nothing of any kind was found.",)),))
    return Section("redaction", title, (
        Paragraph((intro,)),
        Table(("kind", "placeholder", "in the corpus", "in rejected examples and messages"), rows,
              identity_column=False),
    ))


def rejected_section(data: CampaignData) -> Section:
    if not data.rejected:
        return Section("rejected", "Rejected trials", (Paragraph((
            "No trial was rejected: every trial's spec-decode counters agree with its declared speculation.",)),))
    by = {"bench": "the bench", "report": "this report's re-check"}
    rows = tuple((r.cell_id or MISSING, concurrency(r.concurrency), MISSING if r.trial is None else str(r.trial),
                  by[r.by], "; ".join(r.reasons), r.path) for r in data.rejected)
    return Section("rejected", "Rejected trials", (
        Paragraph(("These trials' spec-decode counters contradict the speculation they declare "
                   "(contracts/artifacts/speculation.py): they are kept in the bundle as evidence and are in no "
                   "figure, no plot and no gate count.",)),
        Table(("cell", "concurrency", "trial", "rejected by", "why", "file"), rows, identity_column=False),
    ))



def _floor_state(f: FloorCheck) -> str:
    if f.passed is not None:
        return "passed" if f.passed else "failed"
    return "not applicable" if f.source.startswith("not applicable") else "unmeasured"

def _val(value: object, none: str) -> str:
    return none if value is None else str(value)


def gate_section(data: CampaignData) -> Section:
    d = data.decision
    if d is None:
        return Section("gate", "Gate verdicts", (Paragraph(("No valid gate decision in this bundle.",)),))
    rows, floors, guards = [], [], []
    for cand in d.candidates:
        for lvl in cand.levels:
            key = arm_ref(data, cand.candidate, lvl.concurrency)
            o = lvl.objective
            span = interval(o.interval.low_pct, o.interval.high_pct) if o and o.interval else MISSING
            rows.append((
                key, cand.candidate, concurrency(lvl.concurrency),
                f"{lvl.candidate.trials}/{lvl.baseline.trials}", d.baseline, o.metric if o else d.objective,
                _n(o.baseline_value) if o else MISSING, _n(o.candidate_value) if o else MISSING,
                percent(o.delta_pct) if o else MISSING, span,
                percent(o.noise_bound_pct, signed=False) if o else MISSING,
                o.verdict if o else "unavailable", lvl.outcome,
            ))
            floors += [(key, cand.candidate, concurrency(lvl.concurrency), f"{lvl.candidate.trials}", d.baseline,
                        f.floor, f"{f.minimum:g}", _n(f.measured), _floor_state(f))
                       for f in lvl.floors]
            guards += [(key, cand.candidate, concurrency(lvl.concurrency),
                        f"{lvl.candidate.trials}/{lvl.baseline.trials}",
                        d.baseline, g.guard, _n(g.comparison.baseline_value), _n(g.comparison.candidate_value),
                        percent(g.comparison.delta_pct), percent(g.comparison.noise_bound_pct, signed=False),
                        g.comparison.verdict, _GUARD_RESULTS.get(g.passed, "not compared"))
                       for g in lvl.guards]
    outcomes = tuple((_refs(data, c.candidate), c.candidate, c.outcome, percent(c.worst_gain_pct),
                      concurrency(c.stops_paying_at) if c.stops_paying_at else MISSING, c.reasons[0])
                     for c in d.candidates)
    blocks: list[Block] = [
        Paragraph((f"Decision {d.decision}" + (f", winner {d.winner}" if d.winner else "")
                   + f". Rule: {d.campaign_rule}",)),
        Table(("ID", "candidate", "outcome", "smallest gain", "stops paying at", "why"), outcomes),
        Table(("ID", "candidate", "concurrency", "trials (cand/base)", "named baseline", "objective", "baseline",
               "candidate", "change", "interval (%)", "noise bound", "verdict", "level outcome"), tuple(rows)),
    ]
    if floors:
        blocks.append(Table(("ID", "candidate", "concurrency", "trials", "named baseline", "floor", "minimum",
                             "measured", "result"), tuple(floors)))
    if guards:
        blocks.append(Paragraph(("Guards: a candidate worse beyond the noise on any of these metrics is rejected; "
                                 "one that cannot be compared leaves its level inconclusive.",)))
        blocks.append(Table(("ID", "candidate", "concurrency", "trials (cand/base)", "named baseline", "guard",
                             "baseline", "candidate", "change", "noise bound", "verdict", "result"), tuple(guards)))
    return Section("gate", "Gate verdicts", tuple(blocks))


def latency_section(data: CampaignData, plots: dict[str, Plot]) -> Section:
    rows = []
    for arm in data.arms:
        requests = sum(t.completed + t.failed for t in arm.trials)
        rows.append((*id_cols(arm),
                     *(_spread(fig.spread(arm.trials, a)) for a in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")),
                     f"{sum(t.failed for t in arm.trials)}/{requests}"))
    cols = ("ID", "cell", "concurrency", "trials", "named baseline", "TTFT ms", "TPOT ms", "ITL ms", "E2EL ms",
            "failed/requests")
    blocks: list[Block] = [
        Paragraph(("Each figure: geometric mean of the trials' medians [min - max over trials].",)),
        Table(cols, tuple(rows)),
    ]
    blocks += [_image(p) for p in plots.values() if p.name.startswith("latency-")]
    return Section("latency", "Latency per cell and concurrency (TTFT, TPOT, ITL)", tuple(blocks))


def throughput_section(data: CampaignData, plots: dict[str, Plot]) -> Section:
    rows = tuple((*id_cols(arm), _spread(fig.spread(arm.trials, "output_throughput_tok_per_s"))) for arm in data.arms)
    blocks: list[Block] = [Table(("ID", "cell", "concurrency", "trials", "named baseline", "output tok/s"), rows)]
    blocks += [_image(plots[n]) for n in ("throughput.png",) if n in plots]
    return Section("throughput", "Throughput against concurrency", tuple(blocks))


def acceptance_section(data: CampaignData, plots: dict[str, Plot]) -> Section:
    rows = []
    for arm in data.arms:
        acc = fig.acceptance(arm)
        if acc is None:
            continue
        rows.append((*id_cols(arm), str(acc.k), f"{acc.rate:.3f}", f"{acc.mean_length:.3f}",
                     " / ".join(f"{a:.3f}" for a in acc.per_position), " / ".join(f"{p:.3f}" for p in acc.conditional)))
    if not rows:
        return Section("acceptance", "Acceptance per position",
                       (Paragraph(("No trial carries spec-decode counters.",)),))
    cols = ("ID", "cell", "concurrency", "trials", "named baseline", "k", "acceptance rate",
            "tau (mean acceptance length)", "a_1 / ... / a_k", "p_1 / ... / p_k")
    blocks: list[Block] = [Table(cols, tuple(rows)),
                           *(_image(p) for p in plots.values() if p.name.startswith("acceptance-"))]
    return Section("acceptance", "Acceptance per position", tuple(blocks))


def speedup_section(data: CampaignData, plots: dict[str, Plot]) -> Section:
    return render_predict.speedup_section(data, _image(plots["speedup.png"]) if "speedup.png" in plots else None)


def levers_section(found: list[Lever]) -> Section:
    def item(lever: Lever) -> tuple[Text, ...]:
        evidence = ("evidence: ", *joined([Ref(key) for key in lever.evidence]))
        return ((f"[{lever.rule}] finding: {lever.finding}",), (f"lever: {lever.action}",),
                (f"gate that proves or rejects it: {lever.gate}",), evidence)

    first, rest = found[0], found[1:]
    blocks: list = [Paragraph(("The next measured lever, derived from the data by the rules of docs/publisher.md:",)),
                    Bullets(item(first))]
    if rest:
        blocks.append(Paragraph(("Other levers the data supports, in rule order:",)))
        blocks.append(Bullets(tuple(t for lever in rest for t in item(lever))))
    return Section("next-lever", "Next measured lever", tuple(blocks))


# --- helpers -----------------------------------------------------------------------


def _image(plot: Plot) -> Image:
    caption = (f"{plot.caption}. Identity: ", *joined([Ref(key) for key in plot.evidence]))
    return Image(name=plot.name, title=plot.title, caption=caption, png=plot.png)


def _serving(s: ServingConfig) -> str:
    spec = s.speculative
    if spec is None:
        head = "no speculation"
    else:
        head = f"{spec.method} k={spec.num_speculative_tokens}"
        if spec.model:
            head += f" draft {spec.model}"
        if spec.prompt_lookup_min is not None or spec.prompt_lookup_max is not None:
            head += f" lookup {spec.prompt_lookup_min}-{spec.prompt_lookup_max}"
    return f"{head}; dtype {s.dtype}; {s.graph_mode}; max_num_seqs {s.max_num_seqs or 'default'}"


def _refs(data: CampaignData, cell: str) -> Text | str:
    """Pointers to every arm of a cell (a figure over its levels)."""
    arms = [Ref(a.key) for a in data.arms if a.cell_id == cell]
    return joined(arms) if arms else f"{cell} (no identity in this bundle)"


def _spread(s: fig.Spread | None) -> str:
    return MISSING if s is None else f"{_n(s.mean)} [{_n(s.low)} - {_n(s.high)}]"


def _n(v: float | None) -> str:
    if v is None:
        return MISSING
    return f"{v:.1f}" if abs(v) >= 100 else f"{v:.3g}"
