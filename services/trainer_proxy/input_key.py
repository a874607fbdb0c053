"""The training input key: one sha256 over everything that determines a draft (pure).

Two trainings with the same key saw the same data, ran the same command on the
same target with the same trainer revision, probe and executor kind; a draft
trained under a key may be reused by a later run with that key (services.
trainer_proxy.reuse). Run-specific values never enter the key: the argv is
rendered with the run's own paths ({output_dir}, {corpus_train}, {run_id},
{node}, ...) left as their role, so the same inputs in another run give the
same key. What the files are is hashed by the caller (reuse.py); this module
only combines the digests.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field

from contracts.argv import ArgvTemplate
from contracts.campaign import Campaign, Scheduler
from contracts.envelope import ArtifactRef, RunId, Sha256, Strict
from services.runtime.bundle_records import canonical_json

KEY_VERSION = 1
# Placeholders whose value differs from run to run without changing what is trained:
# where the run's files lie, its ID and its node. They enter the key as their role.
RUN_SPECIFIC = ("run_id", "corpus", "corpus_train", "corpus_heldout", "output_dir", "node", "training.output")
# Placeholders through which the trainer (or probe) reads the heldout records.
SEES_HELDOUT = frozenset({"corpus", "corpus_heldout"})


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
    key: Sha256 = Field(description="sha256 over every other field of this record (canonical JSON).")
    train_sha256: Sha256 = Field(description="sha256 of the train split ({corpus_train}).")
    heldout_sha256: Sha256 | None = Field(
        description="sha256 of the heldout split when the trainer's or probe's argv reads it ({corpus_heldout} or "
        "{corpus}); None otherwise."
    )
    corpus_sha256: Sha256 | None = Field(description="sha256 of CORPUS.jsonl when an argv names {corpus}; None otherwise.")
    argv_template: list[str] = Field(description="commands.train.argv as written.")
    argv: list[str] = Field(description="The argv rendered with run-specific placeholders left as their role.")
    probe_template: list[str] | None = Field(description="commands.train.probe as written; None when unset.")
    probe: list[str] | None = Field(description="The probe argv rendered like argv; None when unset.")
    named_files: list[FileDigest] = Field(
        description="Regular files named literally in argv or probe (the trainer's script, a config), by content."
    )
    target: TreeDigest = Field(description="The target checkpoint ({target}), every file by content.")
    tokenizer: TreeDigest | None = Field(description="The tokenizer folder when it is not the target's; None otherwise.")
    max_model_len: int = Field(description="target.max_model_len ({max_model_len}).")
    trainer_revision: str | None = Field(description="campaign.source_revisions.trainer.")
    target_revision: str | None = Field(description="campaign.source_revisions.target.")
    executor: Scheduler = Field(description="The executor kind: local, slurm or kubernetes.")


class ReusedDraft(Strict):
    """An earlier run's draft, trained with the same input key, verified file by file at plan time."""

    from_run: RunId = Field(description="The run whose draft is reused.")
    key: Sha256 = Field(description="The training input key both runs share.")
    manifest: ArtifactRef = Field(description="That run's training/outputs.json; its sha256 pins every draft file.")
    checkpoint_dir: str = Field(description="That run's draft directory, copied from.")
    files: int = Field(ge=1, description="Draft files copied.")
    total_bytes: int = Field(ge=0, description="Bytes copied.")
    probes: ArtifactRef | None = Field(description="That run's training/probes.json (every probe passed there).")


def role_values(campaign: Campaign) -> dict[str, str]:
    """Placeholder values for the key: roles for run-specific ones, the campaign's own for the rest."""
    values = {name: "{" + name + "}" for name in RUN_SPECIFIC}
    values.update(
        target=campaign.target.checkpoint,
        tokenizer=campaign.target.tokenizer_dir,
        max_model_len=str(campaign.target.max_model_len),
    )
    return values


def _templates(campaign: Campaign) -> list[ArgvTemplate]:
    train = campaign.commands.train
    if train is None:
        return []
    return [train.argv, *([train.probe] if train.probe is not None else [])]


def reads_heldout(campaign: Campaign) -> bool:
    return any(template.placeholders() & SEES_HELDOUT for template in _templates(campaign))


def reads_corpus(campaign: Campaign) -> bool:
    return any("corpus" in template.placeholders() for template in _templates(campaign))


def literal_tokens(campaign: Campaign) -> list[str]:
    """Argv and probe tokens without placeholders: the ones that may name a file to hash."""
    seen: list[str] = []
    for template in _templates(campaign):
        for token in template.root:
            if "{" not in token and "}" not in token and token not in seen:
                seen.append(token)
    return seen


def input_key(
    campaign: Campaign,
    *,
    train_sha256: str,
    heldout_sha256: str,
    corpus_sha256: str,
    target: TreeDigest,
    tokenizer: TreeDigest | None,
    named_files: list[FileDigest],
) -> InputKey:
    """The key of this campaign's training on these inputs. Heldout and corpus hashes
    count only when an argv reads them; the trainer's own command must be set."""
    train = campaign.commands.train
    if train is None:
        raise ValueError("a campaign without commands.train has no training input key")
    values = role_values(campaign)
    fields = {
        "version": KEY_VERSION,
        "train_sha256": train_sha256,
        "heldout_sha256": heldout_sha256 if reads_heldout(campaign) else None,
        "corpus_sha256": corpus_sha256 if reads_corpus(campaign) else None,
        "argv_template": list(train.argv.root),
        "argv": train.argv.render(values),
        "probe_template": list(train.probe.root) if train.probe is not None else None,
        "probe": train.probe.render(values) if train.probe is not None else None,
        "named_files": sorted(named_files, key=lambda f: f.path),
        "target": target,
        "tokenizer": tokenizer,
        "max_model_len": campaign.target.max_model_len,
        "trainer_revision": campaign.source_revisions.trainer,
        "target_revision": campaign.source_revisions.target,
        "executor": campaign.capacity.scheduler,
    }
    # The raw template is in the key next to its rendering: a literal "{{output_dir}}"
    # and the placeholder "{output_dir}" render alike but are different commands.
    digest = hashlib.sha256(canonical_json(fields)).hexdigest()
    return InputKey(key=digest, **fields)


def tree_sha256(files: list[FileDigest]) -> str:
    """The digest of a tree: every file's relative path, size and sha256, sorted by path."""
    listing = [[f.path, f.size_bytes, f.sha256] for f in sorted(files, key=lambda f: f.path)]
    return hashlib.sha256(canonical_json(listing)).hexdigest()
