"""The report's plots, as PNG bytes (matplotlib's Agg canvas, no display, no global pyplot state).

Which plots a campaign gets, hence the report's plot count: docs/publisher.md#plots (answer.py draws the
first under this module's lock). Rendering is deterministic (fixed fonts, no timestamps in the PNG), so a
re-render of the same bundle gives the same bytes and the write-once report is idempotent."""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from services.publisher.report.figures import METRICS, acceptance, baseline_of, speedups, spread
from services.publisher.report.model import ArmLevel, CampaignData
from services.shared.formatting import MISSING, concurrency

DPI = 80
BASE_COLOR, CAND_COLOR = "#7f7f7f", "#1f77b4"
_LOCK = threading.Lock()
# An unlimited concurrency level in plot file names (latency-<cell>-cinf.png): a file name is an identity, so it
# keeps its short spelling; labels and subtitles spell the level as the rest of the report does.
FILE_UNLIMITED = "inf"
LEVEL_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True)
class Plot:
    """One rendered plot."""

    name: str  # file name under report/plots/
    title: str
    caption: str
    evidence: tuple[str, ...]  # identity pointers (ArmLevel keys) of every number drawn
    png: bytes


def render_plots(data: CampaignData) -> list[Plot]:
    # matplotlib's font cache and text layout are shared by every figure of the process:
    # one render at a time (the service renders in a worker thread).
    with _LOCK:
        return _render_all(data)


def _render_all(data: CampaignData) -> list[Plot]:
    plots = [_latency(data, arm) for arm in data.arms if arm.trials]
    plots += [p for cell in data.cells() if (p := _acceptance(data, cell)) is not None]
    for build in (_throughput, _speedup):
        plot = build(data)
        if plot is not None:
            plots.append(plot)
    return plots


def identity_line(arm: ArmLevel, *, levels: str | None = None) -> str:
    """The identity of an arm in one line (plots' subtitles); `levels` replaces its concurrency (pooled plots)."""
    ident = arm.identity
    if ident is None:
        return f"{arm.key}: identity unknown (no identity block)"
    par = ident.parallelism
    spec = ident.serving_config.speculative
    return (
        f"{ident.model} | {ident.hardware} | quant {ident.quantization or 'none'} | tp{par.tensor_parallel_size} "
        f"pp{par.pipeline_parallel_size} dp{par.data_parallel_size} | "
        f"{f'{spec.method} k={spec.num_speculative_tokens}' if spec else 'no speculation'} | {ident.workload_shape} | "
        f"c={levels or concurrency(ident.concurrency)} | {ident.regime} | rev {ident.source_revision or 'unknown'} | "
        f"{len(arm.trials)}/{arm.trials_declared or '?'} trials | baseline {arm.baseline_cell_id or MISSING}"
    )


def _latency(data: CampaignData, arm: ArmLevel) -> Plot:
    base = baseline_of(data, arm)
    groups = ([(base, BASE_COLOR)] if base is not None else []) + [(arm, CAND_COLOR)]
    fig = Figure(figsize=(10, 3.6), dpi=DPI)
    axes = fig.subplots(1, len(METRICS))
    for ax, (attr, label, unit) in zip(axes, METRICS, strict=True):
        for x, (member, color) in enumerate(groups):
            values = spread(member.trials, attr)
            if values is None:
                continue
            offsets = [x + (i - (values.n - 1) / 2) * 0.08 for i in range(values.n)]
            ax.scatter(offsets, values.values, color=color, s=28, zorder=3,
                       label="trials" if x == len(groups) - 1 else None)
            ax.errorbar([x + 0.3], [values.mean],
                        yerr=[[max(0.0, values.mean - values.low)], [max(0.0, values.high - values.mean)]],
                        fmt="s", color=color, capsize=4, zorder=2)
        ax.set_xticks(range(len(groups)), [member.cell_id for member, _ in groups], fontsize=8)
        ax.set_xlim(-0.6, len(groups) - 0.2)
        ax.set_title(f"median {label} per trial ({unit})", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"{arm.key}: latency, trials (dots) and geometric mean with min-max (square)\n{identity_line(arm)}",
                 fontsize=8)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.1, top=0.78, wspace=0.3)
    evidence = (arm.key,) + ((base.key,) if base is not None else ())
    return Plot(
        name=f"latency-{arm.cell_id}-c{concurrency(arm.concurrency, unlimited=FILE_UNLIMITED)}.png",
        title=f"Latency of {arm.key}",
        caption=f"TTFT, TPOT and ITL of {arm.key}, each trial's median and the spread over trials"
        + (f", beside the named baseline {base.key}" if base is not None else ""),
        evidence=evidence,
        png=_png(fig),
    )


def _acceptance(data: CampaignData, cell: str) -> Plot | None:
    arms = [a for a in data.arms if a.cell_id == cell and acceptance(a) is not None]
    if not arms:
        return None
    fig = Figure(figsize=(9, 3.4), dpi=DPI)
    left, right = fig.subplots(1, 2)
    for i, arm in enumerate(arms):
        acc = acceptance(arm)
        assert acc is not None  # filtered above
        positions = list(range(1, acc.k + 1))
        color = LEVEL_COLORS[i % len(LEVEL_COLORS)]
        label = f"c={concurrency(arm.concurrency)}"
        left.plot(positions, acc.per_position, marker="o", color=color, label=label)
        right.plot(positions, acc.conditional, marker="o", color=color, label=label)
    for ax, title in ((left, "a_i: accepted at position i / drafts"), (right, "p_i: accepted at i given i-1")):
        ax.set_xlabel("draft position i", fontsize=8)
        ax.set_xticks(range(1, max(acceptance(a).k for a in arms) + 1))  # type: ignore[union-attr]  # arms holds only arms with an acceptance
        ax.set_ylim(0, 1.05)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    levels = ",".join(concurrency(a.concurrency) for a in arms)
    fig.suptitle(f"{cell}: acceptance per position\n{identity_line(arms[0], levels=levels)}", fontsize=8)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.14, top=0.76, wspace=0.25)
    return Plot(
        name=f"acceptance-{cell}.png",
        title=f"Acceptance per position of {cell}",
        caption=f"Per-position acceptance of {cell}, counters pooled over each level's trials",
        evidence=tuple(a.key for a in arms),
        png=_png(fig),
    )


def _throughput(data: CampaignData) -> Plot | None:
    levels = data.levels
    fig = Figure(figsize=(7, 3.6), dpi=DPI)
    ax = fig.subplots()
    evidence: list[str] = []
    for i, cell in enumerate(data.cells()):
        xs, ys, lows, highs = [], [], [], []
        for x, level in enumerate(levels):
            arm = data.arm(cell, level)
            values = spread(arm.trials, "output_throughput_tok_per_s") if arm else None
            if arm is None or values is None:
                continue
            xs.append(x + (i - 0.5) * 0.05)
            ys.append(values.mean)
            # Clamped: the mean of equal trials can round a hair outside [low, high].
            lows.append(max(0.0, values.mean - values.low))
            highs.append(max(0.0, values.high - values.mean))
            evidence.append(arm.key)
        if xs:
            ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=4, label=cell,
                        color=LEVEL_COLORS[i % len(LEVEL_COLORS)])
    if not evidence:
        return None
    ax.set_xticks(range(len(levels)), [concurrency(c) for c in levels])
    ax.set_xlabel("max concurrency", fontsize=8)
    ax.set_ylabel("output tokens / s", fontsize=8)
    ax.set_title("Output throughput against concurrency (geometric mean, min-max over trials)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.14, top=0.9)
    return Plot(
        name="throughput.png",
        title="Throughput against concurrency",
        caption="Output throughput of every cell at every concurrency level, with the spread over trials",
        evidence=tuple(evidence),
        png=_png(fig),
    )


def _speedup(data: CampaignData) -> Plot | None:
    found = speedups(data)
    if not found:
        return None
    fig = Figure(figsize=(max(6, 1.4 * len(found) + 2), 3.6), dpi=DPI)
    ax = fig.subplots()
    xs = range(len(found))
    ax.bar([x - 0.2 for x in xs], [s.predicted for s in found], width=0.4, color="#aec7e8", label="predicted (tau)")
    ax.bar([x + 0.2 for x in xs], [s.realized for s in found], width=0.4, color=CAND_COLOR,
           label="realized (TPOT ratio)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs), [s.candidate.key for s in found], fontsize=8)
    ax.set_ylabel("speedup over the named baseline (x)", fontsize=8)
    ax.set_title("Predicted speedup from measured acceptance beside the realized TPOT speedup", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.14, top=0.9)
    return Plot(
        name="speedup.png",
        title="Predicted and realized speedup",
        caption="Predicted speedup tau = 1 + sum of a_i beside realized TPOT(baseline) / TPOT(candidate), per "
        "candidate and level",
        evidence=tuple(k for s in found for k in (s.candidate.key, s.baseline.key)),
        png=_png(fig),
    )


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    # No Software/date chunks: the same data gives the same bytes.
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
