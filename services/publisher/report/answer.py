"""The report's first section: the answer per level, its chart first on the page.

The looks are recomputed from DECISION.json alone with the gate's own rule (services/shared/sequential.py),
so the look at the trials used is the decision's own interval (a test holds them equal;
docs/publisher.md#the-report, item 2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from contracts.artifacts.decision import Decision, LevelDecision
from services.publisher.report import plots as plotting
from services.publisher.report.document import Image, Paragraph, Ref, Section, Table
from services.publisher.report.model import CampaignData, arm_key
from services.publisher.report.plots import DPI, Plot, _png
from services.publisher.report.pointers import arm_ref
from services.shared import sequential
from services.shared.formatting import MISSING, concurrency, interval, joined, share

PLOT_NAME = "answer.png"
OUTCOME_COLORS = {"win": "#2ca02c", "reject": "#d62728", "inconclusive": "#7f7f7f", "continue": "#ff7f0e"}


@dataclass(frozen=True)
class Look:
    """The interval of one level's objective after n trials per arm, as a gain in % (positive is better)."""

    trials: int
    low: float
    high: float
    verdict: str


@dataclass(frozen=True)
class Row:
    candidate: str
    level: LevelDecision

    @property
    def gain(self) -> tuple[float, float, float] | None:
        """(gain, low, high) in %, positive is better; None when the objective was not compared."""
        o = self.level.objective
        if o is None or o.delta_pct is None or o.interval is None:
            return None
        if o.direction == "higher_is_better":
            return o.delta_pct, o.interval.low_pct, o.interval.high_pct
        return -o.delta_pct, -o.interval.high_pct, -o.interval.low_pct


def rows(d: Decision) -> list[Row]:
    return [Row(c.candidate, lvl) for c in d.candidates for lvl in c.levels]


def looks(d: Decision, level: LevelDecision) -> list[Look]:
    """The level's interval after each look, recomputed with the gate's rule; [] when it cannot be."""
    o, t = level.objective, d.thresholds
    if o is None or o.interval is None or t.min_effect_pct is None:
        return []
    base, cand = np.asarray(o.baseline_trial_values, float), np.asarray(o.candidate_trial_values, float)
    used = min(base.size, cand.size)
    first = max(t.min_trials, sequential.MIN_LOOK_TRIALS)
    at = range(first, used + 1) if t.max_trials is not None else [used]
    better_up = o.direction == "higher_is_better"
    found = []
    for n in at:
        if n < sequential.MIN_LOOK_TRIALS:
            continue
        seen = sequential.look(base[:n], cand[:n], higher_is_better=better_up,
                               alpha=(1 - t.per_candidate_confidence) / 2, min_effect=t.min_effect_pct / 100,
                               first=first, cap=t.max_trials, bias=(t.server_bias_pct or 0) / 100)
        low, high = 100 * float(np.expm1(seen.low)), 100 * float(np.expm1(seen.high))
        gain_low, gain_high = (low, high) if better_up else (-high, -low)
        found.append(Look(n, gain_low, gain_high, sequential.VERDICT_NAMES[int(seen.verdict)]))
    return found


def answer_plots(data: CampaignData) -> list[Plot]:
    """The chart as the report's first plot, drawn under the plots' lock (matplotlib's shared state); [] when
    there is nothing to draw."""
    with plotting._LOCK:
        plot = answer_plot(data)
    return [plot] if plot is not None else []


def answer_plot(data: CampaignData) -> Plot | None:
    """The first screen's chart; None without a decision or any compared objective."""
    d = data.decision
    drawn = [r for r in rows(d) if r.gain is not None] if d is not None else []
    if d is None or not drawn:
        return None
    effect = d.thresholds.min_effect_pct or 0.0
    fig = Figure(figsize=(max(6.0, 0.8 * len(drawn) + 2.5), 3.6), dpi=DPI)
    ax = fig.subplots()
    if effect:
        ax.axhspan(-effect, effect, color="#dddddd", label=f"within +-{effect:g} % (minimum effect)")
    ax.axhline(0.0, color="black", linewidth=0.8)
    for x, r in enumerate(drawn):
        gain, low, high = r.gain  # type: ignore[misc]  # drawn keeps only the rows with a gain
        color = OUTCOME_COLORS.get(r.level.outcome, "#1f77b4")
        ax.errorbar([x], [gain], yerr=[[gain - low], [high - gain]], fmt="o", color=color, capsize=4)
        label = r.level.outcome + (f", {r.level.trials_used} trials" if r.level.trials_used is not None else "")
        ax.annotate(label, (x, high), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize=7, color=color)
    ax.set_xticks(list(range(len(drawn))),
                  [f"{r.candidate}\nc={concurrency(r.level.concurrency)}" for r in drawn], fontsize=7)
    ax.set_xlim(-0.6, len(drawn) - 0.4)
    ax.set_ylabel(f"gain in {d.objective} (%; up is better)", fontsize=8)
    ax.set_title(f"Per-level answer: {d.decision}" + (f" ({d.winner})" if d.winner else "")
                 + f" - {d.objective} against {d.baseline}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    if effect:
        ax.legend(fontsize=7, loc="best")
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.2, top=0.9)
    keys = {arm.key for arm in data.arms}
    evidence = [k for r in drawn for k in (arm_key(r.candidate, r.level.concurrency),
                                            arm_key(d.baseline, r.level.concurrency)) if k in keys]
    return Plot(
        name=PLOT_NAME,
        title="The answer per level",
        caption=f"Each candidate's gain in {d.objective} per concurrency level (the change, signed so that up is "
        f"better), its interval at {share(d.thresholds.per_candidate_confidence, decimals=1)}, the band of the minimum "
        f"effect (+-{effect:g} %) and the level's outcome with the trials per arm it stopped at",
        evidence=tuple(dict.fromkeys(evidence)),
        png=_png(fig),
    )


def answer_section(data: CampaignData, plots: dict[str, Plot]) -> list[Section]:
    """The first section: the chart, each level's answer, and its interval after each look."""
    d = data.decision
    if d is None:
        return []
    t = d.thresholds
    cap = (f"sequential rounds of {t.min_trials}..{t.max_trials} trials per arm" if t.max_trials is not None
           else "the trials at hand (no cap: one look)")
    blocks: list = [Paragraph((
        f"Decision {d.decision}" + (f", winner {d.winner}" if d.winner else "") + f": {d.objective} "
        f"({d.direction.replace('_', ' ')}) against {d.baseline}, minimum effect {t.min_effect_pct or 0:g} %, "
        f"{cap}.",))]
    plot = plots.get(PLOT_NAME)
    if plot is not None:
        refs = joined(Ref(key) for key in plot.evidence)
        blocks.append(Image(name=plot.name, title=plot.title, caption=(f"{plot.caption}. Identity: ", *refs),
                            png=plot.png))
    answers, history = [], []
    for r in rows(d):
        key, lvl = arm_ref(data, r.candidate, r.level.concurrency), r.level
        g = r.gain
        span = interval(g[1], g[2]) if g else MISSING
        answers.append((key, r.candidate, concurrency(lvl.concurrency), f"{g[0]:+.1f}" if g else MISSING, span,
                        f"{lvl.objective.min_effect_pct or 0:g}" if lvl.objective else MISSING,
                        lvl.objective.verdict if lvl.objective else "unavailable", lvl.outcome,
                        MISSING if lvl.trials_used is None else str(lvl.trials_used), lvl.stopped or "continues"))
        seen = looks(d, lvl)
        for look in seen:
            last = look is seen[-1]
            where = (f"stopped here ({lvl.stopped})" if lvl.stopped else "continues") if last else "went on"
            history.append((key, r.candidate, concurrency(lvl.concurrency), str(look.trials),
                            interval(look.low, look.high), look.verdict, where))
    blocks.append(Table(("ID", "candidate", "concurrency", "gain (%)", "interval (%)", "minimum effect (%)",
                         "verdict", "outcome", "trials per arm", "stopped"), tuple(answers)))
    if history:
        blocks.append(Paragraph(("The interval of each level's gain after each look (trials per arm), recomputed "
                                 "from DECISION.json with the gate's rule, and where the trials stopped:",)))
        blocks.append(Table(("ID", "candidate", "concurrency", "look (trials per arm)", "interval (%)", "verdict",
                             "then"), tuple(history)))
    return [Section("answer", "The answer per level", tuple(blocks))]
