"""vLLM's Prometheus /metrics text -> speculative-decoding counter deltas over a window (pure).

The counters are cumulative since the server started, so a window's figures are the differences of a
scrape right before and one right after it, each counter summed over its other labels. The per-position
list's length is how many tokens the engine really proposes per step
(docs/bench-loadgen.md#spec-decode-deltas-metricspy)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from contracts.events import SpecDecodeDelta
from services.bench.errors import MetricsError

PREFIX = "vllm:spec_decode_"
DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
_COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, ACCEPTED_PER_POS)


@dataclass(frozen=True)
class Sample:
    """One Prometheus sample line."""

    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class SpecDecodeCounters:
    """Cumulative spec-decode counters of one scrape, summed over engines."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: Mapping[int, int] = field(default_factory=dict)


def parse_samples(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition; MetricsError when it does not parse."""
    try:
        return [
            Sample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except (ValueError, TypeError, IndexError) as err:
        raise MetricsError(f"the /metrics text does not parse as Prometheus exposition: {err}") from None


def _counter_name(sample_name: str) -> str | None:
    """The counter a sample belongs to (`X_total`, or a bare `X`); None for others (`X_created`)."""
    base = sample_name.removesuffix("_total")
    return base if base in _COUNTERS else None


def spec_decode_counters(text: str) -> SpecDecodeCounters | None:
    """The spec-decode counters of one scrape; None when the server exports none of them."""
    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    per_position: dict[int, float] = {}
    found = False
    for sample in parse_samples(text):
        if not sample.name.startswith(PREFIX):
            continue
        counter = _counter_name(sample.name)
        if counter is None:
            continue
        found = True
        if counter == ACCEPTED_PER_POS:
            raw = sample.labels.get("position")
            try:
                position = int(raw)  # type: ignore[arg-type]  # a missing label is the TypeError below
            except (TypeError, ValueError):
                raise MetricsError(
                    f"{sample.name} has no integer `position` label (labels: {dict(sample.labels)})"
                ) from None
            per_position[position] = per_position.get(position, 0.0) + sample.value
        else:
            totals[counter] += sample.value
    if not found:
        return None
    return SpecDecodeCounters(
        num_drafts=round(totals[DRAFTS]),
        num_draft_tokens=round(totals[DRAFT_TOKENS]),
        num_accepted_tokens=round(totals[ACCEPTED]),
        accepted_per_position={p: round(v) for p, v in sorted(per_position.items())},
    )


def counters_delta(before: SpecDecodeCounters | None, after: SpecDecodeCounters | None) -> SpecDecodeDelta | None:
    """after - before as the event's block; None when neither scrape has spec-decode counters.

    A counter exported only after the window counts from 0 before it. A counter
    that went down means the server restarted inside the window: MetricsError,
    since the window's figures are lost.
    """
    if before is None and after is None:
        return None
    before = before or SpecDecodeCounters()
    after = after or SpecDecodeCounters()
    drafts = _grew("num_drafts", before.num_drafts, after.num_drafts)
    draft_tokens = _grew("num_draft_tokens", before.num_draft_tokens, after.num_draft_tokens)
    accepted = _grew("num_accepted_tokens", before.num_accepted_tokens, after.num_accepted_tokens)
    positions = set(before.accepted_per_position) | set(after.accepted_per_position)
    per_position = [
        _grew(
            f"accepted at position {p}", before.accepted_per_position.get(p, 0), after.accepted_per_position.get(p, 0)
        )
        for p in range(max(positions) + 1 if positions else 0)
    ]
    return SpecDecodeDelta(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        accepted_per_position=per_position,
        acceptance_rate=accepted / draft_tokens if draft_tokens else None,
        mean_acceptance_length=1 + accepted / drafts if drafts else None,
    )


def spec_decode_delta(before_text: str | None, after_text: str | None) -> SpecDecodeDelta | None:
    """The window's spec-decode block from the two scrapes' texts (None: the server exports no counters).

    Raises MetricsError when a scrape is missing: without both, whether the
    declared speculation ran cannot be told, and that must not read as "none".
    """
    if before_text is None or after_text is None:
        which = "before" if before_text is None else "after"
        raise MetricsError(
            f"the /metrics scrape {which} the window is missing; the spec-decode counters cannot be checked: "
            "make /metrics reachable on the served cell and re-run the window"
        )
    return counters_delta(spec_decode_counters(before_text), spec_decode_counters(after_text))


def _grew(what: str, before: int, after: int) -> int:
    if after < before:
        raise MetricsError(
            f"spec-decode counter {what} went down ({before} -> {after}): the server restarted during the "
            "window; re-run the window"
        )
    return after - before
