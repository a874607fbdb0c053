"""Measured noise of real campaigns, for the gate's power benchmark (tests/perf/bench_gate.py).

    python -m tests.perf.measure_noise --out tests/perf/data/demo-noise.json [--merge] BUNDLE_DIR [BUNDLE_DIR ...]

Reads every counted trial result (`bench/*/trial-*/result-c*.json`) of the given
evidence bundles and, per cell and concurrency level, reports the trial-to-trial
coefficient of variation of the median TPOT (the figure the gate compares), the
request-level CV of TPOT within a trial, the requests per trial and the median TPOT.
The noise model the benchmark simulates with is the median over the standing arms
(and, in A/A campaigns, the standing config served again) per level. Each bundle's
decision is listed too: an A/A campaign (a candidate that is the standing config
again) must never promote. No timing here: the figures come from the bundles.

Bundles are not kept in the repository, so `--merge` keeps the records already in
`--out` (a run ID given again is read afresh): the noise model then pools every
campaign measured so far, across sessions.

`aa_blocks` pairs, per level, the two arms of each A/A campaign's warm-interleaved
blocks: the log ratio of the candidate's (the standing config served again) trial
median over the standing cell's in the same block. Both arms serve the same argv,
so a mean ratio away from 0 beyond chance would be a bias of the design itself
(a server that is measured slower for being the second one launched, say); the
one-sample t-test and the sign test say how far from chance it is, and the split
by which arm ran first in its block separates a position effect from a server one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from contracts import layout
from contracts.artifacts.trials import parse_trial


def _cv(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def bundle_noise(bundle: Path) -> dict[str, Any]:
    """Per cell and level: trial CV, request CV, requests, median TPOT; and the decision."""
    per: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for path in sorted(bundle.glob(layout.trial_result("*", "*", "*"))):
        trial = parse_trial(json.loads(path.read_bytes()), source=str(path))
        if trial.identity is None or trial.completed == 0:
            continue
        per[(trial.identity.cell_id, trial.identity.concurrency)].append(trial)
    for trials in per.values():
        trials.sort(key=lambda t: t.identity.trial)
    cells: list[dict[str, Any]] = []
    for (cell_id, level), trials in sorted(per.items()):
        medians = [float(t.summary["median_tpot_ms"]) for t in trials if t.summary.get("median_tpot_ms")]
        request_cvs = [float(np.std(t.detail.tpot_ms, ddof=1) / np.mean(t.detail.tpot_ms))
                       for t in trials if t.detail is not None and len(t.detail.tpot_ms) > 1]
        cells.append({
            "cell_id": cell_id, "role": trials[0].identity.role, "concurrency": level, "trials": len(trials),
            "regime": trials[0].identity.regime,
            "speculative": trials[0].identity.serving_config.speculative is not None,
            "median_tpot_ms": statistics.median(medians) if medians else None,
            "trial_medians_ms": [round(m, 3) for m in medians],  # in trial (= block) order
            "trial_cv": _cv(medians),
            "request_cv": statistics.median(request_cvs) if request_cvs else None,
            "requests": statistics.median([t.completed for t in trials]),
        })
    plan_path = bundle / layout.BENCH_PLAN
    plan = json.loads(plan_path.read_bytes()) if plan_path.is_file() else {}
    blocks = [block["order"] for block in plan.get("blocks") or []]
    decision_path = bundle / layout.DECISION
    decision = json.loads(decision_path.read_bytes()) if decision_path.is_file() else {}
    # An A/A campaign: more than one cell and none speculates (the standing config served again).
    aa = len({c["cell_id"] for c in cells}) > 1 and not any(c["speculative"] for c in cells)
    return {"run_id": bundle.name, "aa": aa, "decision": decision.get("decision"), "winner": decision.get("winner"),
            "blocks": blocks, "cells": cells}


def aa_blocks(bundles: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per level, over every A/A campaign's blocks: log(candidate / standing) trial median."""
    ratios: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for bundle in bundles:
        if not bundle["aa"] or not bundle.get("blocks"):
            continue
        by = {(c["role"], c["concurrency"]): c["trial_medians_ms"] for c in bundle["cells"]}
        for (role, level), again in by.items():
            standing = by.get(("standing", level))
            if role != "candidate" or standing is None:
                continue
            for index, (a, s) in enumerate(zip(again, standing, strict=False)):
                order = bundle["blocks"][index] if index < len(bundle["blocks"]) else []
                ratios[level].append((float(np.log(a / s)), bool(order) and order[0] != "standing"))
    out: dict[str, dict[str, Any]] = {}
    for level, pairs in sorted(ratios.items()):
        logs = [r for r, _ in pairs]
        first = [r for r, again_first in pairs if again_first]
        second = [r for r, again_first in pairs if not again_first]
        positive = sum(r > 0 for r in logs)
        out[str(level)] = {
            "blocks": len(logs),
            "mean_log_ratio": statistics.fmean(logs),
            "sd_log_ratio": statistics.stdev(logs) if len(logs) > 1 else None,
            "candidate_slower": positive,
            "t_test_p": float(stats.ttest_1samp(logs, 0.0).pvalue) if len(logs) > 1 else None,
            "sign_test_p": float(stats.binomtest(positive, len(logs)).pvalue) if logs else None,
            "mean_log_ratio_candidate_first": statistics.fmean(first) if first else None,
            "mean_log_ratio_standing_first": statistics.fmean(second) if second else None,
            "log_ratios": [round(r, 4) for r in logs],
        }
    return out


def noise_model(bundles: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per level: the median over the arms without speculation of each figure (the A/A noise)."""
    by_level: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for bundle in bundles:
        for cell in bundle["cells"]:
            if not cell["speculative"] and cell["trial_cv"] is not None and cell["request_cv"] is not None:
                by_level[cell["concurrency"]].append(cell)
    return {
        str(level): {
            "tpot_ms": statistics.median(c["median_tpot_ms"] for c in cells),
            "trial_cv": statistics.median(c["trial_cv"] for c in cells),
            "trial_cv_max": max(c["trial_cv"] for c in cells),
            "request_cv": statistics.median(c["request_cv"] for c in cells),
            "requests": int(statistics.median(c["requests"] for c in cells)),
            "arms": len(cells),
        }
        for level, cells in sorted(by_level.items())
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundles", nargs="*", type=Path, help="evidence bundle folders (bundles/<run-id>)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--setup", default="", help="what the campaigns ran (model, windows, regime), in words")
    parser.add_argument("--merge", action="store_true",
                        help="keep the bundles already recorded in --out (their folders may be gone)")
    args = parser.parse_args(argv)
    if not args.bundles and not args.merge:
        parser.error("name at least one bundle, or --merge to recompute the figures of --out")
    bundles = [bundle_noise(path) for path in args.bundles]
    if args.merge and args.out.is_file():
        earlier = json.loads(args.out.read_text())
        fresh = {bundle["run_id"] for bundle in bundles}
        bundles = [b for b in earlier.get("bundles", []) if b["run_id"] not in fresh] + bundles
        args.setup = args.setup or earlier.get("setup", "")
    record = {"setup": args.setup, "levels": noise_model(bundles), "aa_blocks": aa_blocks(bundles), "bundles": bundles}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for bundle in bundles:
        print(f"{bundle['run_id']}: decision {bundle['decision']}")
        for cell in bundle["cells"]:
            print(f"  {cell['cell_id']:<12} c={cell['concurrency']}: TPOT {cell['median_tpot_ms']} ms, "
                  f"trial CV {cell['trial_cv']}, request CV {cell['request_cv']}, {cell['trials']} trials")
    print(json.dumps(record["levels"], indent=2))
    print(json.dumps({level: {k: v for k, v in row.items() if k != "log_ratios"}
                      for level, row in record["aa_blocks"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
