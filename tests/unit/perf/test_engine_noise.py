"""The engine-noise diagnostic's pure parts: its prompts and its summary (tests/perf/engine_noise.py)."""

from __future__ import annotations

import pytest

from tests.perf.engine_noise import WindowRow, chat_prompts, summarize


def row(window: int, tpot: float, steal: float, wait: float, *, variant: str = "default") -> WindowRow:
    return WindowRow(variant=variant, window=window, concurrency=1, median_tpot_ms=tpot, duration_s=30.0,
                     server_cpu_s=60.0, server_wait_s=wait, steal_s=steal)


def test_the_windows_send_twenty_plain_chat_prompts_of_the_sample_traffic_in_a_fixed_order():
    prompts = chat_prompts(20)
    assert len(prompts) == 20
    assert [p.prompt_id for p in prompts] == [f"sample-{i}" for i in range(20)]
    assert all(p.messages and all(isinstance(m.content, str) and m.content for m in p.messages) for p in prompts)
    assert all(p.max_output_tokens == 32 and not p.ignore_eos for p in prompts)
    assert [p.text for p in chat_prompts(20)] == [p.text for p in prompts], "the same prompts every time"


def test_the_summary_gives_each_variant_its_cv_and_how_tpot_moves_with_steal_and_wait():
    rows = [row(0, 40.0, 0.1, 8.0), row(1, 50.0, 1.1, 10.0), row(2, 45.0, 0.6, 9.0),
            row(0, 60.0, 0.5, 5.0, variant="omp1"), row(1, 60.0, 0.5, 5.0, variant="omp1")]
    by_variant = {s["variant"]: s for s in summarize(rows)}
    default = by_variant["default"]
    assert default["windows"] == 3
    assert default["mean_tpot_ms"] == pytest.approx(45.0)
    assert default["trial_cv"] == pytest.approx(5.0 / 45.0, abs=1e-4)
    assert default["r_tpot_steal_s"] == pytest.approx(1.0)
    assert default["r_tpot_server_wait_s"] == pytest.approx(1.0)
    assert (default["min_tpot_ms"], default["max_tpot_ms"]) == (40.0, 50.0)
    omp1 = by_variant["omp1"]
    assert omp1["trial_cv"] == 0.0
    assert "r_tpot_steal_s" not in omp1, "no correlation from two windows"
