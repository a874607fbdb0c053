"""The demo's closing summary reads gate/DECISION.json, including a candidate without figures."""

from __future__ import annotations

import io
import json
from pathlib import Path

from services.cli.demo import headline


def test_a_candidate_without_figures_prints_na_instead_of_crashing(tmp_path: Path) -> None:
    (tmp_path / "gate").mkdir()
    measured = {"metric": "tpot:median", "unit": "ms", "baseline_value": 3.22, "candidate_value": 2.76,
                "delta_pct": -14.3, "interval": {"low_pct": -53.5, "high_pct": 57.8}, "noise_bound_pct": 29.9,
                "verdict": "within_noise", "baseline_trials": 3, "candidate_trials": 3}
    failed = {"metric": "tpot:median", "unit": "ms", "baseline_value": 3.22, "candidate_value": None,
              "delta_pct": None, "interval": None, "noise_bound_pct": None, "verdict": "unavailable",
              "baseline_trials": 3, "candidate_trials": 0}
    decision = {"decision": "inconclusive", "winner": None, "baseline": "standing", "candidates": [
        {"candidate": "draft-k3", "levels": [{"concurrency": 1, "objective": measured}]},
        {"candidate": "ngram-k3", "levels": [{"concurrency": 1, "objective": failed}]},
    ]}
    (tmp_path / "gate/DECISION.json").write_text(json.dumps(decision))
    out = io.StringIO()
    headline(tmp_path, out)
    text = out.getvalue()
    assert "draft-k3 @ concurrency 1: tpot:median 3.22 -> 2.76 ms (-14.3 %, interval -53.5..+57.8 %" in text
    assert "ngram-k3 @ concurrency 1: tpot:median 3.22 -> - ms (- %, interval -..- %, noise bound - %): " \
           "unavailable, 3 vs 0 trials" in text


def test_the_trials_spent_per_level_and_why_they_stopped(tmp_path: Path) -> None:
    (tmp_path / "gate").mkdir()
    objective = {"metric": "tpot:median", "unit": "ms", "baseline_value": 30.0, "candidate_value": 21.0,
                 "delta_pct": -30.0, "interval": {"low_pct": -40.0, "high_pct": -20.0}, "noise_bound_pct": 9.0,
                 "verdict": "better", "baseline_trials": 4, "candidate_trials": 4}
    decision = {"decision": "promote", "winner": "draft-k3", "baseline": "standing", "thresholds": {"max_trials": 5},
                "candidates": [
                    {"candidate": "draft-k3", "levels": [
                        {"concurrency": 1, "objective": objective, "trials_used": 4, "stopped": "decided"},
                        {"concurrency": 4, "objective": objective, "trials_used": 5, "stopped": "cap"}]},
                    {"candidate": "ngram-k3", "levels": [
                        {"concurrency": 1, "objective": objective, "trials_used": 4, "stopped": "moot"}]}]}
    (tmp_path / "gate/DECISION.json").write_text(json.dumps(decision))
    out = io.StringIO()
    headline(tmp_path, out)
    assert ("trials spent per arm (cap 5 per arm): c=1: draft-k3 4 (decided), ngram-k3 4 (moot); "
            "c=4: draft-k3 5 (cap)") in out.getvalue()


def test_an_unlimited_level_is_spelled_unlimited(tmp_path: Path) -> None:
    (tmp_path / "gate").mkdir()
    objective = {"metric": "tpot:median", "unit": "ms", "baseline_value": 30.0, "candidate_value": 21.0,
                 "delta_pct": -30.0, "interval": {"low_pct": -40.0, "high_pct": -20.0}, "noise_bound_pct": 9.0,
                 "verdict": "better", "baseline_trials": 4, "candidate_trials": 4}
    decision = {"decision": "promote", "winner": "draft-k3", "baseline": "standing", "candidates": [
        {"candidate": "draft-k3", "levels": [{"concurrency": None, "objective": objective, "trials_used": 4,
                                              "stopped": "decided"}]}]}
    (tmp_path / "gate/DECISION.json").write_text(json.dumps(decision))
    out = io.StringIO()
    headline(tmp_path, out)
    text = out.getvalue()
    assert "draft-k3 @ concurrency unlimited: tpot:median 30.00 -> 21.00 ms" in text
    assert "unlimited: draft-k3 4 (decided)" in text and "None" not in text


def test_a_progress_line_spells_the_level_and_the_median_tpot_as_the_summary_does() -> None:
    from services.cli.demo import _detail

    event = {"schema": "bench.trial.completed", "cell_id": "ngram-k3", "trial": 0, "completed_requests": 9,
             "failed_requests": 1, "median_tpot_ms": 21.456}
    assert _detail({**event, "concurrency": 4}) == "  | ngram-k3 trial 0 c=4: 9/10 requests, median TPOT 21.46 ms"
    assert _detail({**event, "concurrency": None}).startswith("  | ngram-k3 trial 0 c=unlimited: ")
