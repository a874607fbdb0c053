"""Sequential rounds: the shared stopping rule, `continue`, the stop reasons, the directions,
the minimum effect, and a gate step that never reports `continue`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from contracts.campaign import Campaign, GateSpec
from contracts.events import GateDecided
from services.gate import GateSpecError, decide
from services.gate.app import final
from services.gate.simulate import NoiseModel
from services.runtime.errors import StepFailed
from services.shared import sequential
from tests.unit.cli.commands.test_gate import run, write_cell
from tests.unit.gate.test_decide import arm

ROOT = Path(__file__).resolve().parents[3]
SPEC = GateSpec(objective="tpot", acceptance_floor=0.5)
NOISY = NoiseModel(trial_cv=0.10, request_cv=0.05)


def test_the_spending_holds_the_crossing_chance_over_every_look() -> None:
    # A normal statistic crossing any look's boundary: at most the one-sided alpha, spent by the cap.
    levels = np.array(sequential.nominal_levels(3, 15, 0.025))
    from scipy import stats as st

    bounds = st.norm.isf(levels)
    rng = np.random.default_rng(0)
    paths = np.cumsum(rng.standard_normal((100_000, 15)), axis=1)[:, 2:] / np.sqrt(np.arange(3, 16))
    crossed = float((paths > bounds).any(axis=1).mean())
    assert crossed == pytest.approx(0.025, abs=0.002)
    assert all(0 < level < 0.025 for level in levels)
    assert sequential.nominal_level(3, alpha=0.025, first=3, cap=None) == 0.025  # one look: the full alpha


def test_the_interval_shrinks_as_trials_accumulate() -> None:
    rng = np.random.default_rng(1)
    base, cand = rng.lognormal(0, 0.08, (4000, 15)), rng.lognormal(0, 0.08, (4000, 15))
    widths = [float(np.median(sequential.look(base[:, :n], cand[:, :n], higher_is_better=False, alpha=0.025,
                                              min_effect=0.01, first=3, cap=15).high
                              - sequential.look(base[:, :n], cand[:, :n], higher_is_better=False, alpha=0.025,
                                                min_effect=0.01, first=3, cap=15).low))
              for n in (3, 5, 8, 15)]
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < widths[0] / 3


def test_an_undecided_level_continues_below_the_cap() -> None:
    d = decide(arm(1, "standing", noise=NOISY), {"ngram": arm(2, "ngram", factor=1.0, noise=NOISY)}, SPEC,
               max_trials=15)
    level = d.candidates[0].levels[0]
    assert d.decision == "continue" and d.winner is None
    assert d.candidates[0].outcome == "continue" and level.outcome == "continue"
    assert level.stopped is None and level.trials_used == 3
    assert level.trials_expected_more is None or level.trials_expected_more >= 1
    assert d.reasons[0].startswith("continue: more trials (at most 15 per arm)")
    assert d.thresholds.max_trials == 15 and "Hwang-Shih-DeCani" in (d.thresholds.spending or "")


def test_the_same_trials_at_the_cap_stop_as_cap() -> None:
    d = decide(arm(1, "standing", noise=NOISY), {"ngram": arm(2, "ngram", factor=1.0, noise=NOISY)}, SPEC,
               max_trials=3)
    level = d.candidates[0].levels[0]
    assert d.decision == "inconclusive" and level.stopped == "cap" and level.trials_expected_more == 0


def test_without_a_cap_the_trials_at_hand_are_the_cap_and_nothing_continues() -> None:
    d = decide(arm(1, "standing", noise=NOISY), {"ngram": arm(2, "ngram", factor=1.0, noise=NOISY)}, SPEC)
    assert d.decision == "inconclusive" and d.candidates[0].levels[0].stopped == "cap"
    assert d.thresholds.max_trials is None


def test_a_clear_win_stops_at_the_first_look() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.75)}, SPEC, max_trials=15)
    level = d.candidates[0].levels[0]
    assert d.decision == "promote" and level.stopped == "decided" and level.trials_used == 3
    assert level.objective is not None and level.objective.min_effect_pct == 1.0


def test_a_failed_floor_stops_the_level() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.95, acceptance=0.2, noise=NOISY)}, SPEC,
               max_trials=15)
    assert d.decision == "reject" and d.candidates[0].levels[0].stopped == "floor_failed"


def test_too_few_trials_continue_below_the_cap() -> None:
    d = decide(arm(1, "standing", trials=2), {"ngram": arm(2, "ngram", factor=0.75, trials=2)}, SPEC, max_trials=6)
    level = d.candidates[0].levels[0]
    assert d.decision == "continue" and level.outcome == "continue" and level.trials_expected_more == 1


def test_a_cap_below_the_minimum_trials_is_refused() -> None:
    with pytest.raises(GateSpecError, match="max_trials 2 is below min_trials 3"):
        decide(arm(1, "standing"), {"ngram": arm(2, "ngram")}, SPEC, max_trials=2)


def test_a_level_the_outcome_no_longer_depends_on_stops_as_moot() -> None:
    # fast wins at both levels; same cannot win (no change at c=1: within +-15 %), so its undecided c=2
    # (a 5 % change, its interval reaching past the 15 % minimum effect) no longer matters: the campaign promotes fast.
    spec = GateSpec(objective="tpot", acceptance_floor=0.5, min_effect_pct=15.0)
    d = decide(
        arm(1, "standing", levels=(1, 2)),
        {
            "fast": arm(2, "fast", factor=0.7, levels=(1, 2)),
            "same": arm(3, "same", factor={1: 1.0, 2: 0.95}, levels=(1, 2)),
        },
        spec,
        max_trials=15,
    )
    same = next(c for c in d.candidates if c.candidate == "same")
    assert d.decision == "promote" and d.winner == "fast"
    assert [(lvl.outcome, lvl.stopped) for lvl in same.levels] == [
        ("inconclusive", "decided"),
        ("inconclusive", "moot"),
    ]
    assert same.outcome == "inconclusive"


def test_the_minimum_effect_decides_what_counts() -> None:
    base, cand = arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.75)}
    assert decide(base, cand, SPEC).decision == "promote"
    assert (
        decide(base, cand, GateSpec(objective="tpot", acceptance_floor=0.5, min_effect_pct=40)).decision
        == "inconclusive"
    )


def test_the_gate_step_never_reports_continue() -> None:
    d = decide(arm(1, "standing", noise=NOISY), {"ngram": arm(2, "ngram", factor=1.0, noise=NOISY)}, SPEC,
               max_trials=15)
    assert d.decision == "continue"
    with pytest.raises(StepFailed, match="never reports"):
        final(d)
    with pytest.raises(ValidationError):
        GateDecided(run_id="toy-20261130-040404-abcdef", producer="test", decision="continue", winner=None,
                    decision_ref={"uri": "bundle://x/gate/DECISION.json", "sha256": "0" * 64}, reasons=["x"])
    fixed = decide(arm(1, "standing", noise=NOISY), {"ngram": arm(2, "ngram", factor=1.0, noise=NOISY)}, SPEC)
    assert final(fixed) is fixed


def _campaign(min_trials: int, exploratory: bool) -> dict:
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["gate"]["min_trials"] = min_trials
    data["matrix"]["exploratory"] = exploratory
    return data


def test_min_trials_below_three_needs_an_exploratory_matrix() -> None:
    with pytest.raises(ValidationError, match="gate.min_trials 2 is below 3.*matrix.exploratory: true"):
        Campaign.model_validate(_campaign(2, exploratory=False))
    assert Campaign.model_validate(_campaign(2, exploratory=True)).gate.min_trials == 2
    assert Campaign.model_validate(_campaign(3, exploratory=False)).gate.min_trials == 3


# --- the command line ---------------------------------------------------------------------------


def _files(tmp_path: Path, factor: float = 0.75) -> list[str]:
    write_cell(tmp_path, "standing", seed=1)
    write_cell(tmp_path, "ngram", factor=factor, seed=2)
    return ["--baseline", str(tmp_path / "standing/*.json"), "--candidate", str(tmp_path / "ngram/*.json"),
            "--acceptance-floor", "0.5"]


def test_a_direction_that_contradicts_the_metric_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _files(tmp_path)
    assert run(*files, "--objective", "tpot", "--direction", "higher-is-better") == 2
    err = capsys.readouterr().err.strip()
    assert err == "specdec gate: error: --direction higher-is-better contradicts tpot: tpot is lower-is-better"
    assert run(*files, "--objective", "tpot", "--direction", "lower-is-better",
               "--guard", "output_throughput", "--direction", "lower-is-better") == 2
    assert "contradicts output_throughput: output_throughput is higher-is-better" in capsys.readouterr().err
    assert run(*files, "--objective", "tpot:p99", "--direction", "lower-is-better",
               "--guard", "output_throughput", "--direction", "higher-is-better") == 0


def test_a_direction_before_any_metric_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run(*_files(tmp_path), "--direction", "lower-is-better", "--objective", "tpot")
    assert exc.value.code == 2
    assert "--direction must follow the --objective or --guard it applies to" in capsys.readouterr().err


def test_max_trials_and_min_effect_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _files(tmp_path, factor=0.75)
    assert run(*files, "--objective", "tpot", "--max-trials", "15") == 0
    printed = capsys.readouterr().out
    assert "decision: promote" in printed and "concurrency 1: win, 3 trial(s) per arm, stopped (decided)" in printed
    assert run(*files, "--objective", "tpot", "--min-effect", "40") == 0
    assert "decision: inconclusive" in capsys.readouterr().out
