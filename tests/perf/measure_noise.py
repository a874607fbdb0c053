"""Measured noise of real campaigns, for the gate's power benchmark (tests/perf/bench_gate.py).

    python -m tests.perf.measure_noise --out tests/perf/data/demo-noise.json BUNDLE_DIR [BUNDLE_DIR ...]

Reads every counted trial result (`bench/*/trial-*/result-c*.json`) of the given
evidence bundles and, per cell and concurrency level, reports the trial-to-trial
coefficient of variation of the median TPOT (the figure the gate compares), the
request-level CV of TPOT within a trial, the requests per trial and the median TPOT.
The noise model the benchmark simulates with is the median over the standing arms
(and, in A/A campaigns, the standing config served again) per level. Each bundle's
decision is listed too: an A/A campaign (a candidate that is the standing config
again) must never promote. No timing here: the figures come from the bundles.
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

from contracts import layout
from contracts.trials import parse_trial


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
            "trial_medians_ms": [round(m, 3) for m in medians],
            "trial_cv": _cv(medians),
            "request_cv": statistics.median(request_cvs) if request_cvs else None,
            "requests": statistics.median([t.completed for t in trials]),
        })
    decision_path = bundle / layout.DECISION
    decision = json.loads(decision_path.read_bytes()) if decision_path.is_file() else {}
    # An A/A campaign: more than one cell and none speculates (the standing config served again).
    aa = len({c["cell_id"] for c in cells}) > 1 and not any(c["speculative"] for c in cells)
    return {"run_id": bundle.name, "aa": aa, "decision": decision.get("decision"), "winner": decision.get("winner"),
            "cells": cells}


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
    parser.add_argument("bundles", nargs="+", type=Path, help="evidence bundle folders (bundles/<run-id>)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--setup", default="", help="what the campaigns ran (model, windows, regime), in words")
    args = parser.parse_args(argv)
    bundles = [bundle_noise(path) for path in args.bundles]
    record = {"setup": args.setup, "levels": noise_model(bundles), "bundles": bundles}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    for bundle in bundles:
        print(f"{bundle['run_id']}: decision {bundle['decision']}")
        for cell in bundle["cells"]:
            print(f"  {cell['cell_id']:<12} c={cell['concurrency']}: TPOT {cell['median_tpot_ms']} ms, "
                  f"trial CV {cell['trial_cv']}, request CV {cell['request_cv']}, {cell['trials']} trials")
    print(json.dumps(record["levels"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
