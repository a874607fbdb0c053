"""Parsing one trial result (contracts.artifacts.results): vLLM's format with and without detail, specdec's blocks."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.artifacts.results import Evaluation
from contracts.artifacts.trials import MetricKey, parse_trial, trial_value
from services.gate.simulate import spec_counters, trial_result


def test_summary_and_detail_agree_on_every_latency() -> None:
    raw = trial_result(np.random.default_rng(1), concurrency=2)
    trial = parse_trial(raw, source="t.json")
    assert trial.detail is not None and trial.concurrency == 2
    detail_only = parse_trial({k: v for k, v in raw.items() if not k.endswith("_ms")}, source="d")
    for metric in ("ttft", "tpot", "itl"):
        for stat in ("median", "mean", "p99"):
            key = MetricKey(metric, stat)
            assert trial_value(detail_only, key) == pytest.approx(raw[f"{stat}_{metric}_ms"], rel=1e-9)


def test_percentile_without_a_summary_key_is_computed_from_detail() -> None:
    raw = trial_result(np.random.default_rng(2))
    trial = parse_trial(raw, source="t.json")
    tpots = [(lat - ttft) / (n - 1) * 1e3
             for lat, ttft, n in zip(raw["latencies"], raw["ttfts"], raw["output_lens"], strict=True)]
    assert "p95_tpot_ms" not in raw
    assert trial_value(trial, MetricKey("tpot", "p95")) == pytest.approx(np.percentile(tpots, 95))


def test_plain_file_without_detail_lacks_what_it_does_not_carry() -> None:
    trial = parse_trial(trial_result(np.random.default_rng(3), detailed=False), source="plain.json")
    assert trial.identity is None and trial.detail is None and trial.spec_decode is None
    assert trial_value(trial, MetricKey("tpot", "p95")) is None
    assert trial_value(trial, MetricKey("acceptance_rate", None)) is None
    assert trial_value(trial, MetricKey("tpot", "median")) is not None
    assert any("plain vLLM" in note for note in trial.notes)


def test_failed_requests_are_excluded_from_detail_and_counted() -> None:
    raw = trial_result(np.random.default_rng(4), failed=5)
    del raw["failed"]  # older files: counted from the errors array
    trial = parse_trial(raw, source="t.json")
    from services.gate.simulate import REQUESTS_PER_TRIAL

    assert trial.failed == 5 and trial.completed == REQUESTS_PER_TRIAL
    assert trial.detail is not None and trial.detail.ttft_ms.size == REQUESTS_PER_TRIAL


def test_vllm_spec_decode_keys_are_read_as_a_rate_in_0_1() -> None:
    raw = trial_result(np.random.default_rng(5), detailed=False) | {
        "spec_decode_acceptance_rate": 62.5,  # vLLM writes percent
        "spec_decode_acceptance_length": 2.875,
        "spec_decode_num_drafts": 1000,
        "spec_decode_draft_tokens": 3000,
        "spec_decode_accepted_tokens": 1875,
        "spec_decode_per_position_acceptance_rates": [0.9, 0.6, 0.375],
    }
    trial = parse_trial(raw, source="t.json")
    assert trial.spec_decode_source == "vllm"
    assert trial_value(trial, MetricKey("acceptance_rate", None)) == pytest.approx(0.625)
    assert trial_value(trial, MetricKey("acceptance_length", None)) == pytest.approx(2.875)
    assert trial.spec_decode is not None and trial.spec_decode.accepted_per_position == [900, 600, 375]


def test_specdec_block_is_preferred_to_vllm_keys() -> None:
    counters = spec_counters(0.4, 2)
    raw = trial_result(np.random.default_rng(6), detailed=False, counters=counters) | {
        "spec_decode_num_drafts": 1,
        "spec_decode_draft_tokens": 2,
        "spec_decode_accepted_tokens": 2,
    }
    trial = parse_trial(raw, source="t.json")
    assert trial.spec_decode_source == "specdec" and trial.spec_decode == counters


def test_evaluation_accuracy_then_agreement() -> None:
    rng = np.random.default_rng(7)
    acc = parse_trial(
        trial_result(rng, detailed=False, evaluation=Evaluation(accuracy=0.8, agreement_rate=0.5)), source="a"
    )
    agree = parse_trial(trial_result(rng, detailed=False, evaluation=Evaluation(agreement_rate=0.97)), source="b")
    assert acc.accuracy == 0.8 and agree.accuracy == 0.97


def test_training_metrics_in_a_file_are_ignored() -> None:
    raw = trial_result(np.random.default_rng(8), detailed=False, extra={"training_loss": 0.0, "train_accuracy": 1.0})
    trial = parse_trial(raw, source="t.json")
    assert "training_loss" not in trial.summary and trial.accuracy is None


def test_detail_arrays_of_different_lengths_are_refused() -> None:
    raw = trial_result(np.random.default_rng(11))
    raw["ttfts"] = raw["ttfts"][:-1]
    with pytest.raises(ValueError, match="differ in length"):
        parse_trial(raw, source="t.json")
