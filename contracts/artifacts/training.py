"""What the trainer-proxy writes under training/ for other steps (and later runs) to read, version 1.

| file | model | read by |
| --- | --- | --- |
| `training/outputs.json` | `OutputManifest` | the trainer-proxy of a later run reusing this draft |
| `training/input-key.json` | `KeyRecord` (its `InputKey`) | later runs, to reuse the draft; the publisher (the key) |
| `training/draft-cost.json` | `DraftCost` | the publisher (predicted speedup of a draft_model candidate) |

`InputKey` is everything that determines a draft and one sha256 over it; the
trainer-proxy computes it (services/trainer_proxy/planning/input_key.py) and a plan
names a `ReusedDraft` when an earlier run trained under the same key. No I/O
here.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from contracts.campaign import Scheduler
from contracts.envelope import ArtifactRef, RunId, Sha256, Strict

KEY_VERSION: Final = 1
OUTPUTS_VERSION: Final = 1


# --- training/outputs.json -------------------------------------------------------------


class OutputFile(Strict):
    """One entry under the output directory."""

    path: str = Field(description="Path relative to the output directory.")
    kind: Literal["file", "symlink", "other"] = Field(description="Regular file, symlink (not followed) or other.")
    sha256: Sha256 | None = Field(description="sha256 of a regular file's bytes; None for others.")
    size_bytes: int | None = Field(description="Size of a regular file; None for others.")
    uri: str | None = Field(
        description="bundle:// URI when registered as an artifact; None when the name cannot be one."
    )
    note: str | None = Field(default=None, description="Why the entry is not a registered artifact, when it is not.")


class OutputManifest(Strict):
    """`training/outputs.json`: every output file of the trainer and its hash."""

    version: Literal[1] = Field(default=OUTPUTS_VERSION, description="Format version.")
    run_id: RunId = Field(description="The run.")
    output_dir: str = Field(description="Absolute path of the output directory.")
    checkpoint_subdir: str | None = Field(
        default=None,
        description="The draft checkpoint's folder relative to output_dir (commands.train.checkpoint_subdir): what "
        "{training.output} names; None: output_dir itself. Every file under output_dir is listed either way.",
    )
    partial: bool = Field(description="True when the trainer did not finish cleanly (killed, failed): kept anyway.")
    files: list[OutputFile] = Field(description="Every entry, sorted by path.")
    total_bytes: int = Field(ge=0, description="Bytes of all regular files.")
    reused_from: RunId | None = Field(
        default=None, description="The run whose identical draft these files were copied from; None when trained here."
    )


# --- the training input key ------------------------------------------------------------


class FileDigest(Strict):
    """One file, by content."""

    path: str = Field(description="The path as named (relative to its tree, or to the working directory).")
    size_bytes: int = Field(ge=0, description="Size in bytes.")
    sha256: Sha256 = Field(description="sha256 of the bytes.")


class TreeDigest(Strict):
    """A checkpoint directory (or file), by the content of every file in it."""

    path: str = Field(description="The path as the campaign writes it.")
    files: int = Field(ge=0, description="Regular files hashed (symlinks to files are followed).")
    total_bytes: int = Field(ge=0, description="Bytes of all the files.")
    sha256: Sha256 = Field(description="sha256 over every file's relative path, size and sha256, sorted by path.")


class InputKey(Strict):
    """Everything that determines the draft, and the key over it."""

    version: Literal[1] = Field(default=KEY_VERSION, description="Key format version; part of the key.")
    key: Sha256 = Field(
        description="sha256 over every other field of this record (canonical JSON; checkpoint_subdir only when set)."
    )
    train_sha256: Sha256 = Field(description="sha256 of the train split ({corpus_train}).")
    heldout_sha256: Sha256 | None = Field(
        description="sha256 of the heldout split when the trainer's or probe's argv reads it ({corpus_heldout} or "
        "{corpus}); None otherwise."
    )
    corpus_sha256: Sha256 | None = Field(
        description="sha256 of CORPUS.jsonl when an argv names {corpus}; None otherwise."
    )
    argv_template: list[str] = Field(description="commands.train.argv as written.")
    argv: list[str] = Field(description="The argv rendered with run-specific placeholders left as their role.")
    probe_template: list[str] | None = Field(description="commands.train.probe as written; None when unset.")
    probe: list[str] | None = Field(description="The probe argv rendered like argv; None when unset.")
    named_files: list[FileDigest] = Field(
        description="Regular files named literally in argv or probe (the trainer's script, a config), by content."
    )
    target: TreeDigest = Field(description="The target checkpoint ({target}), every file by content.")
    tokenizer: TreeDigest | None = Field(
        description="The tokenizer folder when it is not the target's; None otherwise."
    )
    max_model_len: int = Field(description="target.max_model_len ({max_model_len}).")
    trainer_revision: str | None = Field(description="campaign.source_revisions.trainer.")
    target_revision: str | None = Field(description="campaign.source_revisions.target.")
    executor: Scheduler = Field(description="The executor kind: local, slurm or kubernetes.")
    checkpoint_subdir: str | None = Field(
        default=None,
        description="commands.train.checkpoint_subdir, the checkpoint's folder below {output_dir}; hashed into the key "
        "only when set, so the key of a campaign without it is what it was before the field existed.",
    )


class ReusedDraft(Strict):
    """An earlier run's draft, trained with the same input key, verified file by file at plan time."""

    from_run: RunId = Field(description="The run whose draft is reused.")
    key: Sha256 = Field(description="The training input key both runs share.")
    manifest: ArtifactRef = Field(description="That run's training/outputs.json; its sha256 pins every draft file.")
    checkpoint_dir: str = Field(description="That run's output directory ({output_dir}), copied whole.")
    files: int = Field(ge=1, description="Draft files copied.")
    total_bytes: int = Field(ge=0, description="Bytes copied.")
    probes: ArtifactRef | None = Field(description="That run's training/probes.json (every probe passed there).")


# --- training/input-key.json -------------------------------------------------------------


class KeyRecord(Strict):
    """`training/input-key.json`: a completed training's key, for later runs to find."""

    version: Literal[1] = Field(default=1, description="Format version.")
    run_id: RunId = Field(description="The run whose training completed.")
    key: Sha256 = Field(description="Its training input key.")
    inputs: InputKey = Field(description="What the key was computed over.")
    output: ArtifactRef = Field(description="The run's training/outputs.json: its draft, every file by sha256.")
    reused_from: RunId | None = Field(description="The run it reused the draft of; None when it trained.")


# --- training/draft-cost.json ----------------------------------------------------------


class DraftCost(Strict):
    """The draft's forward cost per token against the target's, both timed on the same batch.

    Measured by the trainer-proxy (services/trainer_proxy/checks/draft_cost.py) after the
    probes pass, and again on the copy of a reused draft: transformers on the CPU,
    both in float32, the same batch of heldout prompts, the same thread count, a
    warm-up forward of each, then interleaved repetitions, medians. It is what a
    draft_model candidate's predicted speedup divides by: one speculative step costs
    about one target forward plus k draft forwards. A batched forward's cost per token
    is a throughput figure, not a decode step's latency; the ratio is what is used.
    Absent when it could not be measured (the trainer-proxy logs why).
    """

    version: Literal[1] = Field(default=1, description="Format version.")
    run_id: RunId = Field(description="The run.")
    batch_prompts: int = Field(
        ge=1, description="Prompts in the timed batch (the first heldout prompts, else the probe's fixed text)."
    )
    batch_tokens: int = Field(
        ge=1, description="Real tokens in the timed batch (padding left out); every prompt cut to 64 tokens."
    )
    repetitions: int = Field(ge=1, description="Timed forwards of each model (interleaved draft, target, draft, ...).")
    threads: int = Field(ge=1, description="torch threads both models ran with (torch.get_num_threads()).")
    dtype: str = Field(description="dtype both models ran in (float32, whatever the checkpoints were saved in).")
    draft_ms_per_token: float = Field(gt=0, description="Median draft forward time over the batch, per token, ms.")
    target_ms_per_token: float = Field(gt=0, description="Median target forward time over the batch, per token, ms.")
    relative_cost: float = Field(
        gt=0, description="draft_ms_per_token / target_ms_per_token, computed from the two fields as recorded."
    )
    draft_parameters: int = Field(ge=1, description="Parameters of the draft.")
    target_parameters: int = Field(ge=1, description="Parameters of the target.")
