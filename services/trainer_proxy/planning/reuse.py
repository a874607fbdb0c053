"""Draft reuse by training input key: hashing the inputs, finding an earlier run's identical draft, and
copying it into this run's bundle.

A missing or changed file, a partial draft or an untrusted manifest means no reuse: the trainer runs.
The draft is copied, never linked (a run's bundle stays its own evidence), hashed again and compared
with the source's manifest (docs/trainer-proxy.md#draft-reuse).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from contracts import layout
from contracts.artifacts.training import FileDigest, InputKey, KeyRecord, OutputManifest, ReusedDraft, TreeDigest
from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef, RunId, Sha256, Strict
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore, hash_file
from services.trainer_proxy.errors import TrainingStopped
from services.trainer_proxy.execution.capture import hash_outputs
from services.trainer_proxy.planning.input_key import input_key, literal_tokens, tree_sha256
from services.trainer_proxy.planning.model import PlanInputs, TrainingPlan


class ReuseRecord(Strict):
    """`training/reuse.json`: this run's draft is a verified copy of another run's."""

    version: Literal[1] = Field(default=1, description="Format version.")
    run_id: RunId = Field(description="This run.")
    reused_from: RunId = Field(description="The run whose draft was copied.")
    key: Sha256 = Field(description="The training input key both runs share.")
    plan_sha256: Sha256 = Field(description="The approved plan that named the reuse.")
    source_manifest: ArtifactRef = Field(description="The source run's training/outputs.json.")
    source_probes: ArtifactRef | None = Field(description="The source run's training/probes.json (all passed there).")
    output: ArtifactRef = Field(description="This run's training/outputs.json, naming the source run.")
    checkpoint_dir: str = Field(
        description="The draft checkpoint in the copy: this run's training/output, or its checkpoint_subdir below it."
    )
    files: int = Field(ge=0, description="Files copied.")
    total_bytes: int = Field(ge=0, description="Bytes copied.")
    duration_s: float = Field(ge=0, description="Seconds the copy and its hashing took.")


@dataclass(frozen=True)
class Lookup:
    """What the plan says about reuse: the draft found, or why none."""

    found: ReusedDraft | None
    note: str


# --- hashing the inputs -------------------------------------------------------------------------


def _resolve(path: str, cwd: str) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else Path(cwd) / candidate


def tree_digest(written: str, cwd: str) -> TreeDigest | None:
    """Every regular file under a checkpoint directory (or the one file), by content; None when absent."""
    root = _resolve(written, cwd)
    files: list[FileDigest] = []
    if root.is_file():
        sha, size = hash_file(root)
        files.append(FileDigest(path=root.name, size_bytes=size, sha256=sha))
    elif root.is_dir():
        # Symlinked files are followed (a Hugging Face snapshot links its blobs); folders are not.
        for folder, dirs, names in os.walk(root, followlinks=False):
            dirs.sort()
            for name in sorted(names):
                path = Path(folder) / name
                if path.is_file():
                    sha, size = hash_file(path)
                    files.append(FileDigest(path=path.relative_to(root).as_posix(), size_bytes=size, sha256=sha))
    else:
        return None
    return TreeDigest(path=written, files=len(files), total_bytes=sum(f.size_bytes for f in files),
                      sha256=tree_sha256(files))


def named_files(campaign: Campaign, cwd: str) -> list[FileDigest]:
    """Regular files named literally in the trainer's or probe's argv. Folders are not read:
    one could be a dataset or a cache of any size."""
    found = []
    for token in literal_tokens(campaign):
        if len(token) > 4096 or "\0" in token:
            continue
        path = _resolve(token, cwd)
        if path.is_file():
            sha, size = hash_file(path)
            found.append(FileDigest(path=token, size_bytes=size, sha256=sha))
    return found


def compute_key(campaign: Campaign, inputs: PlanInputs, cwd: str) -> tuple[InputKey | None, str]:
    """The key, or None and why there is none (the target is not a local file or folder)."""
    target = tree_digest(campaign.target.checkpoint, cwd)
    if target is None:
        return None, (f"no training input key: the target {campaign.target.checkpoint!r} is not a file or folder "
                      f"under {cwd}, so its content cannot be hashed; the trainer runs")
    tokenizer = None
    if campaign.target.tokenizer_dir != campaign.target.checkpoint:
        tokenizer = tree_digest(campaign.target.tokenizer_dir, cwd)
        if tokenizer is None:
            return None, (f"no training input key: the tokenizer {campaign.target.tokenizer_dir!r} is not a file or "
                          "folder, so its content cannot be hashed; the trainer runs")
    key = input_key(
        campaign, train_sha256=inputs.corpus_train.sha256, heldout_sha256=inputs.corpus_heldout.sha256,
        corpus_sha256=inputs.corpus.sha256, target=target, tokenizer=tokenizer, named_files=named_files(campaign, cwd),
    )
    return key, ""


# --- finding an earlier draft ----------------------------------------------------------------------


def _safe_relpath(path: str) -> bool:
    parts = Path(path).parts
    return bool(parts) and not Path(path).is_absolute() and ".." not in parts


def _check_source(bundle: BundleStore, run_id: str, record: KeyRecord) -> tuple[ReusedDraft | None, str]:
    """The run's draft when every file still hashes as its manifest records, else why not."""
    try:
        manifest_ref = bundle.ref(run_id, layout.TRAINING_OUTPUTS)
        if manifest_ref.sha256 != record.output.sha256:
            return None, "its training/outputs.json is not the one its training completed with"
        manifest = OutputManifest.model_validate(bundle.read_json(run_id, layout.TRAINING_OUTPUTS))
    except (BundleError, ValidationError) as exc:
        return None, f"its training/outputs.json cannot be trusted ({exc})"
    if manifest.partial or not manifest.files:
        return None, "its draft is partial or empty"
    source = bundle.run_dir(run_id).absolute() / layout.TRAINING_OUTPUT_DIR
    for entry in manifest.files:
        if entry.kind != "file" or entry.sha256 is None or not _safe_relpath(entry.path):
            return None, f"its draft holds {entry.path!r} ({entry.kind}), which cannot be verified by content"
        path = source / entry.path
        if path.is_symlink() or not path.is_file():
            return None, f"its draft file {entry.path} is missing"
        try:
            sha, size = hash_file(path)
        except OSError as exc:
            # Another run's folder: its trouble rules out its draft, never this run's training.
            return None, f"its draft file {entry.path} cannot be read ({exc.strerror or exc})"
        if (sha, size) != (entry.sha256, entry.size_bytes):
            return None, (f"its draft file {entry.path} changed since it was recorded "
                          f"(sha256 {sha[:12]}..., recorded {entry.sha256[:12]}...)")
    try:
        probes: ArtifactRef | None = bundle.ref(run_id, layout.TRAINING_PROBES)
    except ArtifactMissing:
        probes = None
    return ReusedDraft(
        from_run=run_id, key=record.key, manifest=manifest_ref, checkpoint_dir=str(source), files=len(manifest.files),
        total_bytes=manifest.total_bytes, probes=probes,
    ), ""


def find_reusable(bundle: BundleStore, key: InputKey, run_id: str) -> Lookup:
    """The newest other run in the bundle root whose training completed under `key` with its draft intact."""
    candidates = []
    for other in bundle.list_runs():
        if other == run_id:
            continue
        try:
            candidates.append(((bundle.run_dir(other) / layout.TRAINING_INPUT_KEY).stat().st_mtime_ns, other))
        except OSError:
            continue
    rejected = []
    for _, other in sorted(candidates, reverse=True):
        try:
            record = KeyRecord.model_validate(bundle.read_json(other, layout.TRAINING_INPUT_KEY))
        except (BundleError, ValidationError):
            continue  # an untrustworthy record is no evidence of any key
        if record.key != key.key:
            continue
        found, why = _check_source(bundle, other, record)
        if found is not None:
            return Lookup(found, (
                f"reused: run {other} completed training with this input key and its {found.files} draft file(s) "
                "still have the sha256 its outputs.json records; they are copied into this run, nothing is trained"
            ))
        rejected.append(f"run {other}: {why}")
    if rejected:
        return Lookup(None, "not reused: " + "; ".join(rejected) + "; the trainer runs")
    return Lookup(None, "not reused: no other run in the bundle root completed training with this input key; "
                  "the trainer runs")


# --- executing a reuse plan ------------------------------------------------------------------------


def _copy_file(source: Path, dest: Path, scratch: Path) -> None:
    # Whole or not at all: a redelivery after a crash finds each file complete or absent.
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=scratch, prefix=".reuse-")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _listing(manifest: OutputManifest) -> list[tuple[str, str | None, int | None]]:
    return [(f.path, f.sha256, f.size_bytes) for f in manifest.files]


def copy_draft(bundle: BundleStore, plan: TrainingPlan, plan_sha256: str) -> ReuseRecord:
    """Copy the planned source draft into this run, hash it, compare; TrainingStopped when it differs."""
    draft = plan.reuse
    assert draft is not None, "copy_draft runs reuse plans only"
    run_id = plan.run_id
    started = time.monotonic()
    try:
        source = OutputManifest.model_validate(bundle.read_json(draft.from_run, layout.TRAINING_OUTPUTS))
        if bundle.ref(draft.from_run, layout.TRAINING_OUTPUTS).sha256 != draft.manifest.sha256:
            raise BundleError(f"it is no longer the manifest the plan names ({draft.manifest.sha256})")
    except (BundleError, ValidationError) as exc:
        raise TrainingStopped(_failed(draft.from_run, f"its training/outputs.json cannot be trusted: {exc}"),
                              error_type="ReuseFailed") from None
    output_dir = Path(plan.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    source_dir = bundle.run_dir(draft.from_run).absolute() / layout.TRAINING_OUTPUT_DIR
    for entry in source.files:
        dest = output_dir / entry.path
        if dest.exists():
            continue  # an earlier delivery copied it (whole: see _copy_file)
        try:
            _copy_file(source_dir / entry.path, dest, output_dir.parent)
        except OSError as exc:
            raise TrainingStopped(_failed(draft.from_run, f"{entry.path} cannot be copied: {exc}"),
                                  error_type="ReuseFailed") from None
    ref, copied = hash_outputs(bundle, run_id, output_dir=output_dir, partial=False, reused_from=draft.from_run,
                               checkpoint_subdir=plan.checkpoint_subdir)
    if _listing(copied) != _listing(source):
        differ = sorted(set(_listing(copied)) ^ set(_listing(source)))
        raise TrainingStopped(
            _failed(draft.from_run, f"the copy differs from its outputs.json at {sorted({d[0] for d in differ})}"),
            error_type="ReuseFailed", artifacts=[ref],
        )
    return ReuseRecord(
        run_id=run_id, reused_from=draft.from_run, key=draft.key, plan_sha256=plan_sha256,
        source_manifest=draft.manifest,
        source_probes=draft.probes, output=ref, checkpoint_dir=plan.checkpoint_dir, files=len(copied.files),
        total_bytes=copied.total_bytes, duration_s=round(time.monotonic() - started, 3),
    )


def _failed(source: str, why: str) -> str:
    return (f"the draft of run {source} named by the approved plan cannot be reused: {why}; nothing was trained. "
            "Submit a new run (its lookup skips a changed draft) or set commands.train.reuse: false")


def read_reuse(bundle: BundleStore, run_id: str) -> ReuseRecord | None:
    """This run's reuse record, when an earlier delivery wrote it."""
    try:
        return ReuseRecord.model_validate(bundle.read_json(run_id, layout.TRAINING_REUSE))
    except ArtifactMissing:
        return None


def record_key(
    bundle: BundleStore, plan: TrainingPlan, output: ArtifactRef, reused_from: str | None
) -> ArtifactRef | None:
    """Write `training/input-key.json` for a completed training (same bytes on redelivery)."""
    if plan.input_key is None:
        return None
    record = KeyRecord(run_id=plan.run_id, key=plan.input_key.key, inputs=plan.input_key, output=output,
                       reused_from=reused_from)
    return bundle.write_json(plan.run_id, layout.TRAINING_INPUT_KEY, record)
