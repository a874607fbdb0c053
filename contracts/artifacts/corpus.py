"""CORPUS.jsonl records and CORPUS.jsonl.manifest.json: strict, versioned models.

The corpus step writes them (`services.corpus`); the bench-runner reads the
heldout records only through these models.

A record line is `CorpusRecord.model_dump_json()` (docs/corpus.md,
"Records"); its schema version is the manifest's `record_version`, not a field
of every line, so the lines stay exactly the documented record. The manifest
is `CorpusManifest.model_dump_json(indent=2)`.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from contracts.envelope import Sha256, Strict

CORPUS_RECORD_VERSION: Final = 1
MANIFEST_VERSION: Final = 1

# The content classes of `services.shared.text.content.CONTENT_CLASSES` (contracts
# import no services); a unit test keeps the two in step.
ContentClass = Literal["code", "structured", "math", "chat", "multilingual", "agentic", "rag"]
Split = Literal["train", "heldout"]


class ChatMessage(Strict):
    """One chat turn, redacted."""

    role: str = Field(min_length=1, description="Chat role as the traffic had it: system, user, assistant, tool, ...")
    content: str = Field(description="The turn's text, redacted (secrets and personal data are <KIND> placeholders).")


class CorpusRecord(Strict):
    """One line of CORPUS.jsonl."""

    id: str = Field(
        pattern=r"^[0-9a-f]{16}$", description="Stable ID: 64-bit digest of the prompt's normalized text, hex."
    )
    messages: list[ChatMessage] = Field(min_length=1, description="The prompt in chat form, redacted.")
    reference_completion: str | None = Field(
        description="The completion the traffic logged, redacted; None when the traffic had none."
    )
    input_tokens: int = Field(ge=0, description="Prompt tokens (the traffic's count, else tokenizer, else estimate).")
    output_tokens: int = Field(ge=0, description="Output tokens (the traffic's count, else tokenizer, else estimate).")
    content_class: ContentClass = Field(description="Content class by the profiler's rules.")
    split: Split = Field(description="train (for training) or heldout (for bench prompts and acceptance figures).")


class RejectedExample(Strict):
    """One traffic line the corpus step could not use, redacted."""

    line: int = Field(ge=1, description="1-based line number in the traffic file.")
    kind: str = Field(description="Rejection kind (the profiler's kinds).")
    reason: str = Field(description="Why, redacted.")


class InputAccounting(Strict):
    """What happened to every traffic line. Blank lines count nowhere but `blank_lines`."""

    lines: int = Field(ge=0, description="Lines read, blank ones included.")
    blank_lines: int = Field(ge=0, description="Blank lines skipped.")
    accepted: int = Field(ge=0, description="Lines parsed into a record.")
    rejected: int = Field(ge=0, description="Lines rejected as malformed.")
    rejected_by_kind: dict[str, int] = Field(description="Rejected lines per kind.")
    rejected_examples: list[RejectedExample] = Field(description="The first rejected lines, redacted.")
    skipped: dict[str, int] = Field(
        description="Accepted records left out before sampling, per reason: no_text (token-ID or empty prompt), "
        "no_output_tokens (neither completion nor count), too_long (input + output > max_model_len)."
    )
    exact_duplicates: int = Field(ge=0, description="Records dropped as exact duplicates of a kept prompt.")
    near_duplicates: int = Field(ge=0, description="Candidates dropped as near duplicates of a kept prompt.")
    unique: int = Field(ge=0, description="Usable records after exact dedup: the population sampled from.")


class TokenSources(Strict):
    """How many usable records took each token-count source, per side."""

    input: dict[str, int] = Field(description="from_fields, from_tokenizer, estimated, missing for prompts.")
    output: dict[str, int] = Field(description="from_fields, from_tokenizer, estimated, missing for outputs.")


class Redaction(Strict):
    """Redaction applied to everything the step wrote.

    Backward compatible: `ruleset` and `placeholders` came with the detector-based
    redaction (kinds such as `aws_secret_key`, `phone`); a manifest written before
    them (kinds `secret`, `email`, ...) still reads, with their defaults.
    """

    counts: dict[str, int] = Field(description="Replacements per kind in the corpus (every kind listed, 0 included).")
    records_redacted: int = Field(ge=0, description="Corpus records with at least one replacement.")
    diagnostics_counts: dict[str, int] = Field(description="Replacements in rejected examples and messages.")
    ruleset: str | None = Field(
        default=None,
        description="The redaction's rule version and detector library versions; None in manifests written before it.",
    )
    placeholders: dict[str, str] = Field(
        default_factory=dict,
        description="Each kind's placeholder, <SECRET:kind> or <PII:kind> (its category); empty in older manifests.",
    )


class Distance(Strict):
    """How close the corpus is to the profile (and, for comparison, the unsampled traffic)."""

    method: str = Field(description="How the statistics are computed.")
    ks_input_tokens: float | None = Field(description="KS statistic of the corpus's input tokens vs the profile.")
    ks_output_tokens: float | None = Field(description="KS statistic of the corpus's output tokens vs the profile.")
    tv_content_class: float | None = Field(description="Total variation distance of content classes vs the profile.")
    traffic_ks_input_tokens: float | None = Field(description="The same KS for all unique usable traffic records.")
    traffic_ks_output_tokens: float | None = Field(description="The same KS for all unique usable traffic records.")
    traffic_tv_content_class: float | None = Field(description="The same TV for all unique usable traffic records.")
    unreachable_target_share: float = Field(
        ge=0, le=1, description="Profile mass in length buckets or classes the traffic has no record for."
    )


class Stratum(Strict):
    """One (input-length bucket x content class) stratum with records."""

    input_lower: int = Field(ge=0, description="Inclusive lower edge of the input-length bucket, tokens.")
    input_upper: int | None = Field(description="Exclusive upper edge, tokens; None for the open last bucket.")
    content_class: ContentClass = Field(description="Content class.")
    target: float = Field(ge=0, le=1, description="Target share of the corpus (traffic joint raked to the profile).")
    available: int = Field(ge=0, description="Unique usable traffic records in the stratum.")
    quota: int = Field(ge=0, description="Records the allocation asked for.")
    selected: int = Field(ge=0, description="Records in the corpus.")
    heldout: int = Field(ge=0, description="Of which in the heldout split.")


class RenderCheck(Strict):
    """The chat-template render check."""

    status: Literal["passed", "not_run"] = Field(description="passed, or not_run with `reason` (a failure raises).")
    reason: str | None = Field(description="Why it did not run; None when it ran.")
    template_source: str | None = Field(description="Where the chat template came from.")
    records_rendered: int = Field(ge=0, description="Records rendered (all, or a seeded sample of large corpora).")
    max_tokens_seen: int | None = Field(
        description="Largest rendered prompt + output tokens; None without tokenizer.json."
    )
    max_model_len: int | None = Field(description="The limit checked; None when unknown (length not checked).")


class Splits(Strict):
    """Record counts per split."""

    train: int = Field(ge=0, description="Records in the train split.")
    heldout: int = Field(ge=0, description="Records in the heldout split.")
    total: int = Field(ge=0, description="All records.")


class CorpusManifest(Strict):
    """CORPUS.jsonl.manifest.json."""

    version: Literal[1] = Field(default=MANIFEST_VERSION, description="Manifest schema version.")
    record_version: Literal[1] = Field(default=CORPUS_RECORD_VERSION, description="Schema version of the record lines.")
    corpus_file: str = Field(description="File name of the corpus, beside this manifest.")
    corpus_sha256: Sha256 = Field(description="Hex sha256 of the corpus file's bytes.")
    corpus_size_bytes: int = Field(ge=0, description="Size of the corpus file in bytes.")
    profile_sha256: Sha256 = Field(description="Hex sha256 of PROFILE.json's bytes.")
    traffic_sha256: Sha256 = Field(description="Hex sha256 of the traffic file's bytes.")
    traffic_is_profiled_file: bool = Field(
        description="True when the traffic's sha256 is the profile's input sha256 "
        "(the corpus samples the profiled file)."
    )
    tokenizer_dir: str | None = Field(
        description="--tokenizer folder used for counts and the render check; None if none."
    )
    max_model_len: int | None = Field(
        description="Limit applied: records with input + output tokens above it are left out and the render "
        "check enforces it; None when neither given nor found in the tokenizer folder."
    )
    seed: int = Field(description="Seed of sampling and split; the same inputs and seed give the same bytes.")
    size_requested: int | None = Field(
        description="--size; None: the largest corpus whose stratum shares are within 0.05 TV of the target."
    )
    heldout_share: float = Field(ge=0, le=1, description="Requested share of the heldout split.")
    near_duplicate_threshold: float = Field(
        description="Estimated Jaccard at or above which prompts are near duplicates."
    )
    records: Splits = Field(description="Record counts per split.")
    content_classes: dict[str, int] = Field(description="Corpus records per content class.")
    input: InputAccounting = Field(description="What happened to every traffic line.")
    token_sources: TokenSources = Field(description="Token-count sources of the usable records.")
    redaction: Redaction = Field(description="Redaction counts.")
    distance: Distance = Field(description="Distance of the corpus to the profile.")
    strata: list[Stratum] = Field(description="Strata with a target, available records or selected records.")
    render_check: RenderCheck = Field(description="The chat-template render check.")
