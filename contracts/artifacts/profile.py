"""PROFILE.json: the strict, versioned model of a traffic (or shapes) profile.

The profiler writes it (`services.profiler`); the corpus step reads it only
through this model. PROFILE.json is `Profile.model_dump_json(indent=2)`. A field
whose value cannot be computed is null and its section's `reason` (or
`unavailable_reason`) says why.

Versioning: `version` stays 1 while changes only add optional fields (with a
default), so a PROFILE.json written before a field existed still validates;
`ngram_advice` is such a field (null in an older profile).
"""

from __future__ import annotations

import math
from typing import Final, Literal

from pydantic import Field, model_validator

from contracts.envelope import Sha256, Strict

PROFILE_VERSION: Final = 1
Method = Literal["ngram", "suffix", "draft_model", "eagle3", "none"]


class InputInfo(Strict):
    """What was profiled."""

    path: str | None = Field(description="Traffic JSONL path as given; None for shapes.")
    sha256: Sha256 | None = Field(description="Hex sha256 of the traffic file's bytes; None for shapes.")
    size_bytes: int = Field(ge=0, description="Size of the traffic file in bytes; 0 for shapes.")
    shapes: list[str] = Field(description="Names of the workload shapes profiled; empty for traffic.")


class RejectedLine(Strict):
    """One rejected traffic line (the first ones of a file), redacted."""

    line: int = Field(ge=1, description="1-based line number in the traffic file.")
    kind: str = Field(description="Rejection kind: not_json, not_object, unknown_form, wrong_type, ...")
    reason: str = Field(description="Why the line was rejected, redacted.")
    excerpt: str = Field(description="The line's first characters, redacted (secrets become <KIND> placeholders).")


class Records(Strict):
    """Line accounting. Blank lines are skipped and counted nowhere but `blank_lines`."""

    accepted: int = Field(ge=0, description="Lines profiled.")
    rejected: int = Field(ge=0, description="Non-blank lines rejected as malformed.")
    blank_lines: int = Field(ge=0, description="Blank lines skipped (not counted as accepted or rejected).")
    rejected_share: float = Field(ge=0, le=1, description="rejected / (accepted + rejected); 0 when both are 0.")
    reject_threshold: float = Field(ge=0, le=1, description="The profile fails when rejected_share exceeds this.")
    rejected_by_kind: dict[str, int] = Field(description="Rejected lines per rejection kind.")
    rejected_examples: list[RejectedLine] = Field(description="The first rejected lines, redacted.")
    forms: dict[str, int] = Field(description="Accepted lines per traffic form: openai, sharegpt, flat.")


class CountSources(Strict):
    """How one side's token counts were obtained (each accepted record takes exactly one)."""

    from_fields: int = Field(ge=0, description="Records whose line carried the count (usage or *_tokens field).")
    from_tokenizer: int = Field(ge=0, description="Records counted with the --tokenizer folder.")
    estimated: int = Field(ge=0, description="Records whose count was estimated from text.")
    missing: int = Field(ge=0, description="Records with neither a count nor text (e.g. no response).")


class TokenCounting(Strict):
    """Token counting provenance."""

    tokenizer_dir: str | None = Field(description="Tokenizer folder used for lines without counts; None if none.")
    estimate_method: str = Field(description="The estimate used when neither a count nor a tokenizer was available.")
    estimated_records: int = Field(ge=0, description="Records with at least one side estimated.")
    input: CountSources = Field(description="Sources of input (prompt) counts.")
    output: CountSources = Field(description="Sources of output (completion) counts.")


class HistogramBin(Strict):
    """One token-length bin: lower <= tokens < upper."""

    lower: int = Field(ge=0, description="Inclusive lower edge, tokens.")
    upper: int | None = Field(description="Exclusive upper edge, tokens; None for the open last bin.")
    count: int = Field(ge=0, description="Records in the bin.")


class TokenStats(Strict):
    """Distribution of one side's token counts; percentiles use numpy's default linear interpolation."""

    count: int = Field(ge=0, description="Records with a count on this side.")
    mean: float | None = Field(description="Mean tokens; None when count is 0.")
    p50: float | None = Field(description="Median tokens.")
    p90: float | None = Field(description="90th percentile, tokens.")
    p99: float | None = Field(description="99th percentile, tokens.")
    max: int | None = Field(description="Largest count, tokens.")
    histogram: list[HistogramBin] = Field(description="Counts per fixed bin (edges 0, 16, 32, ..., 131072, open).")


class Concurrency(Strict):
    """Requests in flight over [start, start + latency) and arrivals; null values carry `reason`."""

    records_with_times: int = Field(ge=0, description="Records with both a start time and a latency.")
    records_with_start: int = Field(ge=0, description="Records with a start time (used for the arrival rate).")
    mean: float | None = Field(description="Time-weighted mean of requests in flight over the traffic's span.")
    max: int | None = Field(description="Most requests in flight at once.")
    arrival_rate_per_s: float | None = Field(description="Arrivals per second between the first and last start.")
    span_s: float | None = Field(description="Seconds from the first start to the last end (or last start).")
    reason: str | None = Field(description="Why a value is null; None when all are set.")


class ContentMix(Strict):
    """Fractions of sampled records per content class; they sum to 1 (or are all null, with `reason`)."""

    code: float | None = Field(description="Share of code requests.")
    structured: float | None = Field(description="Share of structured output requests (JSON, YAML, XML, CSV).")
    math: float | None = Field(description="Share of math requests.")
    chat: float | None = Field(description="Share of chat and prose requests.")
    multilingual: float | None = Field(description="Share of mainly non-English requests.")
    agentic: float | None = Field(description="Share of tool-using (agentic) requests.")
    rag: float | None = Field(description="Share of retrieval-augmented / long-context requests.")
    records_classified: int = Field(ge=0, description="Records classified (the sample).")
    reason: str | None = Field(description="Why the fractions are null; None when set.")

    @model_validator(mode="after")
    def _sums_to_one(self) -> ContentMix:
        values = [self.code, self.structured, self.math, self.chat, self.multilingual, self.agentic, self.rag]
        if all(v is None for v in values):
            if self.reason is None:
                raise ValueError("content_mix without fractions needs a reason")
        elif any(v is None for v in values) or not math.isclose(sum(values), 1.0, abs_tol=1e-9):  # type: ignore[arg-type]  # no None: any() is checked first
            raise ValueError("content_mix fractions must all be set and sum to 1")
        return self


class Repetition(Strict):
    """Word n-gram reuse of outputs (see docs/profiler.md); predicts ngram/suffix acceptance."""

    ngram_n: int = Field(ge=1, description="n of the word n-grams.")
    records_measured: int = Field(ge=0, description="Sampled records with an output of at least n words.")
    mean: float | None = Field(description="Mean share of output n-grams found in the prompt.")
    p50: float | None = Field(description="Median prompt reuse.")
    p90: float | None = Field(description="90th percentile prompt reuse.")
    share_above_half: float | None = Field(description="Share of measured records reusing >= 50 % from the prompt.")
    context_mean: float | None = Field(description="Mean share found in the prompt or earlier in the output.")
    reason: str | None = Field(description="Why the values are null; None when set.")


class Sampling(Strict):
    """The sample that content_mix and repetition were measured on."""

    method: str = Field(description="How records were sampled.")
    cap: int = Field(ge=2, description="Most records kept in the sample.")
    stride: int = Field(ge=1, description="Final stride: every stride-th accepted record was measured.")
    records_considered: int = Field(ge=0, description="Accepted records the sample was drawn from.")
    records_sampled: int = Field(ge=0, description="Records measured.")
    sampled: bool = Field(description="True when fewer than all accepted records were measured.")


class Recommendation(Strict):
    """The speculative method the profile suggests, from the rules in docs/profiler.md."""

    method: Method = Field(description="ngram, suffix, draft_model, eagle3 or none.")
    num_speculative_tokens: int = Field(ge=0, description="Suggested tokens per draft; 0 with method none.")
    reasons: list[str] = Field(min_length=1, description="The rules that fired, in order, in words.")


class NgramAdvice(Strict):
    """Settings for ngram (prompt-lookup) speculation derived from the traffic's reuse (docs/profiler.md, N-rules).

    Advice for a campaign that measures ngram, whichever method `recommended_method` names; the
    bench and the gate decide. The settings are all set or all null (then `reasons` says why).
    """

    num_speculative_tokens: int | None = Field(
        ge=1, description="Suggested k (tokens per draft); None without reuse evidence."
    )
    prompt_lookup_min: int | None = Field(ge=1, description="Suggested smallest n-gram (tokens) the lookup matches.")
    prompt_lookup_max: int | None = Field(ge=1, description="Suggested largest n-gram (tokens) the lookup matches.")
    reused_span_words: float | None = Field(
        ge=0,
        description="Median length in words of the runs of output words copied from the prompt (per record the "
        "median run, then the median over records with a run); None when no output copies a span.",
    )
    tokens_per_word: float | None = Field(
        gt=0, description="Output tokens per output word over the sampled records with both; None when none has both."
    )
    reused_span_tokens: float | None = Field(
        ge=0,
        description="The span the lookup settings were derived from, tokens (reused_span_words x tokens_per_word).",
    )
    estimated_acceptance: float | None = Field(
        ge=0, le=1,
        description="An estimate, not a promise: the mean share of output word n-grams found in the prompt "
        "(repetition.mean), read as the share of output positions a prompt lookup could draft correctly.",
    )
    reasons: list[str] = Field(min_length=1, description="The rules that set (or could not set) each value, in words.")

    @model_validator(mode="after")
    def _all_or_nothing(self) -> NgramAdvice:
        settings = (self.num_speculative_tokens, self.prompt_lookup_min, self.prompt_lookup_max)
        if any(v is None for v in settings) and any(v is not None for v in settings):
            raise ValueError("ngram_advice sets k, prompt_lookup_min and prompt_lookup_max together, or none of them")
        low, high = self.prompt_lookup_min, self.prompt_lookup_max
        if low is not None and high is not None and low > high:
            raise ValueError("ngram_advice: prompt_lookup_min must not exceed prompt_lookup_max")
        return self


class Shape(Strict):
    """A named synthetic workload shape."""

    name: str = Field(description="Shape name.")
    input_tokens: int = Field(ge=1, description="Prompt length, tokens.")
    output_tokens: int = Field(ge=1, description="Output length, tokens.")
    description: str = Field(description="What the shape stands for.")


class Profile(Strict):
    """PROFILE.json."""

    version: Literal[1] = Field(default=PROFILE_VERSION, description="PROFILE.json schema version.")
    source: Literal["traffic", "shapes"] = Field(description="Profiled from a traffic file or from named shapes.")
    input: InputInfo = Field(description="What was profiled.")
    records: Records = Field(description="Line accounting.")
    token_counting: TokenCounting = Field(description="Where token counts came from.")
    input_tokens: TokenStats = Field(description="Prompt length distribution, tokens.")
    output_tokens: TokenStats = Field(description="Output length distribution, tokens.")
    concurrency: Concurrency = Field(description="Concurrency and arrival rate.")
    content_mix: ContentMix = Field(description="Content class fractions.")
    repetition: Repetition = Field(description="Output n-gram reuse.")
    sampling: Sampling = Field(description="The sample behind content_mix and repetition.")
    shapes: list[Shape] = Field(description="The shapes profiled (source=shapes); empty for traffic.")
    recommended_method: Recommendation = Field(description="Suggested speculative method.")
    ngram_advice: NgramAdvice | None = Field(
        default=None,
        description="Suggested ngram settings (k, prompt_lookup_min/max) from the reuse; None in a profile written "
        "before the field existed.",
    )
