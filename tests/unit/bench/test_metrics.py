"""Spec-decode counter deltas from vLLM's /metrics text (services.bench.metrics)."""

from __future__ import annotations

import pytest

from services.bench.errors import MetricsError
from services.bench.metrics import counters_delta, spec_decode_counters, spec_decode_delta


def exposition(drafts: float, draft_tokens: float, accepted: float, per_pos: list[float], *, engines: int = 1) -> str:
    """A /metrics text shaped like vLLM's (prometheus_client counters, one series per engine)."""
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="toy"} 0.0',
    ]
    for name, value in (("num_drafts", drafts), ("num_draft_tokens", draft_tokens), ("num_accepted_tokens", accepted)):
        lines += [f"# HELP vllm:spec_decode_{name} Number of {name}.", f"# TYPE vllm:spec_decode_{name} counter"]
        for e in range(engines):
            lines.append(f'vllm:spec_decode_{name}_total{{engine="{e}",model_name="toy"}} {value / engines}')
            lines.append(f'vllm:spec_decode_{name}_created{{engine="{e}",model_name="toy"}} 1.7e+09')
    lines += ["# HELP vllm:spec_decode_num_accepted_tokens_per_pos Accepted tokens per position.",
              "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]
    for e in range(engines):
        for pos, value in enumerate(per_pos):
            lines.append(
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",model_name="toy",position="{pos}"}} '
                f"{value / engines}"
            )
    return "\n".join(lines) + "\n"


def test_delta_and_derived_rates():
    before = exposition(10, 30, 12, [6, 4, 2])
    after = exposition(110, 330, 162, [76, 54, 32])
    delta = spec_decode_delta(before, after)
    assert delta is not None
    assert (delta.num_drafts, delta.num_draft_tokens, delta.num_accepted_tokens) == (100, 300, 150)
    assert delta.accepted_per_position == [70, 50, 30]
    assert delta.acceptance_rate == pytest.approx(0.5)
    assert delta.mean_acceptance_length == pytest.approx(2.5)


def test_series_of_several_engines_are_summed():
    counters = spec_decode_counters(exposition(40, 120, 60, [30, 20, 10], engines=2))
    assert counters is not None
    assert (counters.num_drafts, counters.num_draft_tokens, counters.num_accepted_tokens) == (40, 120, 60)
    assert dict(counters.accepted_per_position) == {0: 30, 1: 20, 2: 10}


def test_no_counters_means_none():
    text = 'vllm:num_requests_running{engine="0"} 1.0\n'
    assert spec_decode_counters(text) is None
    assert spec_decode_delta(text, text) is None


def test_idle_window_has_zero_drafts_and_no_rates():
    text = exposition(5, 15, 3, [2, 1, 0])
    delta = spec_decode_delta(text, text)
    assert delta is not None and delta.num_drafts == 0
    assert delta.accepted_per_position == [0, 0, 0]  # one entry per exported series, even when idle
    assert delta.acceptance_rate is None and delta.mean_acceptance_length is None


def test_counters_appearing_after_the_window_start_from_zero():
    delta = counters_delta(None, spec_decode_counters(exposition(4, 8, 2, [2, 0])))
    assert delta is not None and delta.num_drafts == 4 and delta.accepted_per_position == [2, 0]


def test_counter_reset_is_an_error():
    with pytest.raises(MetricsError, match="restarted"):
        spec_decode_delta(exposition(100, 300, 150, [80, 50, 20]), exposition(3, 9, 2, [1, 1, 0]))


def test_missing_scrape_is_an_error_not_no_speculation():
    with pytest.raises(MetricsError, match="before the window is missing"):
        spec_decode_delta(None, exposition(1, 1, 1, [1]))


def test_malformed_text_and_missing_position():
    with pytest.raises(MetricsError, match="does not parse"):
        spec_decode_counters('vllm:spec_decode_num_drafts_total{engine="0" 3\n')
    with pytest.raises(MetricsError, match="position"):
        spec_decode_counters('vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0"} 3\n')
