"""The training input key: one sha256 over everything that determines a draft (pure).

Two trainings with one key saw the same data and ran the same command on the same target, so a later
run may reuse the draft (reuse.py). Run-specific values never enter the key (docs/trainer-proxy.md#draft-reuse
has the table); the caller hashes the files and this module only combines the digests.
"""

from __future__ import annotations

import hashlib

from contracts.argv import ArgvTemplate
from contracts.artifacts.training import KEY_VERSION, FileDigest, InputKey, TreeDigest
from contracts.campaign import Campaign
from services.runtime.bundle.bundle_records import canonical_json
from services.shared.secret_args import mask_argv

# Placeholders whose value differs from run to run without changing what is trained:
# where the run's files lie, its ID and its node. They enter the key as their role.
RUN_SPECIFIC = ("run_id", "corpus", "corpus_train", "corpus_heldout", "output_dir", "node", "training.output")
# Placeholders through which the trainer (or probe) reads the heldout records.
SEES_HELDOUT = frozenset({"corpus", "corpus_heldout"})


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
    fields: dict[str, object] = {
        "version": KEY_VERSION,
        "train_sha256": train_sha256,
        "heldout_sha256": heldout_sha256 if reads_heldout(campaign) else None,
        "corpus_sha256": corpus_sha256 if reads_corpus(campaign) else None,
        # A credential's value (--hf-token, --api-key) does not make the draft: the key, its record and the
        # plan hold the commands with it masked (services/shared/secret_args.py).
        "argv_template": mask_argv(train.argv.root),
        "argv": mask_argv(train.argv.render(values)),
        "probe_template": mask_argv(train.probe.root) if train.probe is not None else None,
        "probe": mask_argv(train.probe.render(values)) if train.probe is not None else None,
        "named_files": sorted(named_files, key=lambda f: f.path),
        "target": target,
        "tokenizer": tokenizer,
        "max_model_len": campaign.target.max_model_len,
        "trainer_revision": campaign.source_revisions.trainer,
        "target_revision": campaign.source_revisions.target,
        "executor": campaign.capacity.scheduler,
    }
    # Which folder is the draft changes what is served: two campaigns differing only in it must not
    # share a draft. Hashed only when set, so the key of a campaign without it (and the drafts
    # recorded under that key) stays what it was before the field existed.
    if train.checkpoint_subdir is not None:
        fields["checkpoint_subdir"] = train.checkpoint_subdir
    # The raw template is in the key next to its rendering: a literal "{{output_dir}}"
    # and the placeholder "{output_dir}" render alike but are different commands.
    digest = hashlib.sha256(canonical_json(fields)).hexdigest()
    return InputKey(key=digest, **fields)


def tree_sha256(files: list[FileDigest]) -> str:
    """The digest of a tree: every file's relative path, size and sha256, sorted by path."""
    listing = [[f.path, f.size_bytes, f.sha256] for f in sorted(files, key=lambda f: f.path)]
    return hashlib.sha256(canonical_json(listing)).hexdigest()
