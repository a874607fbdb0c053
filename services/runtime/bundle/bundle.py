"""The evidence bundle store: one folder per run ID holding its write-once, hashed artifacts.

Several services, possibly on several hosts, write one run folder at once and handlers are retried,
so: an artifact appears whole or not at all (a temp file, then `os.link`, which fails if the name is
taken); it is recorded once (the same bytes return the same ref, other bytes raise ArtifactConflict);
every path is validated before any I/O and may not leave the run folder through a symlink
(docs/design.md#the-evidence-bundle).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from contracts.envelope import ArtifactRef
from services.runtime import failpoints
from services.runtime.bundle.bundle_events import EventLog, EventScan, fsync_dir, scan_events
from services.runtime.bundle.bundle_journal import journal_spans
from services.runtime.bundle.bundle_paths import (
    EVENTS_NAME,
    INDEX_DIR,
    MANIFEST_NAME,
    ArtifactConflict,
    ArtifactCorrupt,
    ArtifactMissing,
    BundleError,
    InvalidContent,
    InvalidPath,
    make_uri,
    parse_uri,
    validate_relpath,
    validate_run_id,
)
from services.runtime.bundle.bundle_records import (
    CAMPAIGN_RELPATH,
    IndexRecord,
    Manifest,
    build_manifest,
    canonical_json,
    index_name,
)

__all__ = [
    "ArtifactConflict",
    "ArtifactCorrupt",
    "ArtifactMissing",
    "BundleError",
    "BundleStore",
    "InvalidContent",
    "InvalidPath",
]

_CHUNK_BYTES = 1 << 20
_FILE_MODE = 0o644


class BundleStore:
    """Evidence bundles under `root`. Construction does no I/O; folders appear on first write."""

    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = Path(root)
        # fsync files and folders before a write returns: a step acks its message
        # only once its artifacts are durable. Tests of logic may turn it off.
        self._fsync = fsync
        self._logs: dict[str, EventLog] = {}
        self._logs_lock = threading.Lock()

    # --- runs -----------------------------------------------------------------

    def run_dir(self, run_id: str) -> Path:
        return self.root / validate_run_id(run_id)

    def create_run(self, run_id: str) -> Path:
        path = self.run_dir(run_id)
        self._real_run_dir(run_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def exists(self, run_id: str) -> bool:
        path = self.run_dir(run_id)
        return path.is_dir() and not path.is_symlink()

    def list_runs(self) -> list[str]:
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        return sorted(
            e.name for e in entries if e.is_dir(follow_symlinks=False) and _is_run_id(e.name)
        )

    # --- artifacts ------------------------------------------------------------

    def write_bytes(self, run_id: str, relpath: str, data: bytes) -> ArtifactRef:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidContent(f"write_bytes takes bytes, not {type(data).__name__}; use write_json for data")
        data = bytes(data)
        path = self._artifact_path(run_id, relpath)
        sha, size = hashlib.sha256(data).hexdigest(), len(data)
        recorded = self._read_record(run_id, relpath)
        if recorded is not None:
            return self._same_or_conflict(run_id, recorded, sha, size)
        self._mkdirs(path.parent, relpath)
        if not self._publish(path, data):
            # The name is taken: a concurrent writer, a crash before the record,
            # or an external file. Same bytes: adopt it. Other bytes: conflict.
            have_sha, have_size = self._hash_existing(path, relpath)
            if (have_sha, have_size) != (sha, size):
                raise ArtifactConflict(
                    f"{make_uri(run_id, relpath)} already exists with sha256 {have_sha} ({have_size} bytes); "
                    "artifacts are write-once: write the new content under another path"
                )
        failpoints.hit("bundle.file-before-record")
        return self._record(run_id, relpath, sha, size)

    def write_json(self, run_id: str, relpath: str, obj: Any) -> ArtifactRef:
        return self.write_bytes(run_id, relpath, canonical_json(obj))

    def register_file(self, run_id: str, relpath: str) -> ArtifactRef:
        """Record a file an external process wrote inside the run folder (e.g. a trainer's output)."""
        path = self._artifact_path(run_id, relpath)
        sha, size = self._hash_existing(path, relpath)
        recorded = self._read_record(run_id, relpath)
        if recorded is not None:
            return self._same_or_conflict(run_id, recorded, sha, size)
        return self._record(run_id, relpath, sha, size)

    def ref(self, run_id: str, relpath: str) -> ArtifactRef:
        self._artifact_path(run_id, relpath)
        record = self._read_record(run_id, relpath)
        if record is None:
            raise ArtifactMissing(
                f"{make_uri(run_id, relpath)} was never recorded: write or register it first"
            )
        return _ref(run_id, record)

    def adopt(self, run_id: str, relpath: str) -> ArtifactRef | None:
        """The ref of an artifact this store wrote, recording it first when a crash came between its file and
        its index record; None when there is no file. Only for paths no other process writes: `write_bytes`
        publishes a file whole (link of a complete temp file), so a file there without a record is complete."""
        path = self._artifact_path(run_id, relpath)
        recorded = self._read_record(run_id, relpath)
        if recorded is not None:
            return _ref(run_id, recorded)
        try:
            sha, size = self._hash_existing(path, relpath)
        except ArtifactMissing:
            return None
        return self._record(run_id, relpath, sha, size)

    def read_bytes(self, run_id: str, relpath: str, *, verify: bool = True) -> bytes:
        ref = self.ref(run_id, relpath)
        path = self._artifact_path(run_id, relpath)
        try:
            data = path.read_bytes()
        except FileNotFoundError as err:
            raise ArtifactCorrupt(f"{ref.uri} is recorded but its file is gone from {path}") from err
        if verify:
            sha = hashlib.sha256(data).hexdigest()
            if (sha, len(data)) != (ref.sha256, ref.size_bytes):
                raise ArtifactCorrupt(
                    f"{ref.uri} was changed on disk: recorded sha256 {ref.sha256} ({ref.size_bytes} bytes), "
                    f"now {sha} ({len(data)} bytes); the evidence can no longer be trusted"
                )
        return data

    def read_json(self, run_id: str, relpath: str) -> Any:
        data = self.read_bytes(run_id, relpath)
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as err:
            raise InvalidContent(f"{make_uri(run_id, relpath)} is not JSON: {err}") from err

    def resolve(self, uri: str) -> Path:
        """bundle://<run_id>/<relpath> -> absolute path inside the run folder (need not exist)."""
        run_id, relpath = parse_uri(uri)
        return self._artifact_path(run_id, relpath).absolute()

    def artifacts(self, run_id: str) -> list[ArtifactRef]:
        return [_ref(run_id, r) for r in self._records(run_id)]

    # --- derived files ----------------------------------------------------------

    def manifest_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / MANIFEST_NAME

    def rebuild_manifest(self, run_id: str) -> Path:
        """Write manifest.json from the index; readers see the old or the new one whole."""
        run_dir = self.create_run(run_id)
        records = self._records(run_id)
        has_campaign = any(r.path == CAMPAIGN_RELPATH for r in records)
        campaign = self.read_json(run_id, CAMPAIGN_RELPATH) if has_campaign else None
        lost, repaired = journal_spans(self, run_id, records)
        data = canonical_json(build_manifest(run_id, records, campaign, lost=lost, repaired=repaired))
        target = run_dir / MANIFEST_NAME
        tmp = self._write_temp(run_dir, data)
        try:
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
        if self._fsync:
            fsync_dir(run_dir)
        return target

    def read_manifest(self, run_id: str) -> Manifest:
        path = self.manifest_path(run_id)
        try:
            return Manifest.model_validate_json(path.read_bytes())
        except FileNotFoundError as err:
            raise ArtifactMissing(f"no manifest for run {run_id}: call rebuild_manifest first") from err
        except ValidationError as err:
            raise ArtifactCorrupt(f"{path} is not a valid manifest: rebuild it ({err})") from err

    # --- events -----------------------------------------------------------------

    def events_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / EVENTS_NAME

    def append_event(self, run_id: str, event_id: str, line: bytes) -> bool:
        """Append one event line unless its event_id is already in events.jsonl; False on a duplicate."""
        self.create_run(run_id)
        with self._logs_lock:
            log = self._logs.get(run_id)
            if log is None:
                log = self._logs[run_id] = EventLog(self.events_path(run_id), fsync=self._fsync)
        return log.append(event_id, line)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return self.scan_events(run_id).events

    def scan_events(self, run_id: str) -> EventScan:
        """Events, the numbers of lines left unreadable in the file, and the events torn lines name but lack."""
        return scan_events(self.events_path(run_id))

    # --- internals ------------------------------------------------------------

    def _real_run_dir(self, run_id: str) -> str:
        """Real path of the run folder; InvalidPath if the run folder is a symlink elsewhere."""
        real_root = os.path.realpath(self.root)
        real_run = os.path.realpath(self.run_dir(run_id))
        if real_run != os.path.join(real_root, run_id):
            raise InvalidPath(f"run folder {self.run_dir(run_id)} leads outside {self.root} through a symlink")
        return real_run

    def _artifact_path(self, run_id: str, relpath: str) -> Path:
        # Pure checks first: nothing below runs for a malformed ID or path.
        validate_run_id(run_id)
        validate_relpath(relpath)
        real_run = self._real_run_dir(run_id)
        path = self.run_dir(run_id) / relpath
        if not os.path.realpath(path).startswith(real_run + os.sep):
            raise InvalidPath(f"{make_uri(run_id, relpath)} leads outside its run folder through a symlink")
        return path

    def _mkdirs(self, folder: Path, relpath: str) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as err:
            raise ArtifactConflict(
                f"cannot create the folder of {relpath!r}: a file already takes part of that path"
            ) from err

    def _write_temp(self, folder: Path, data: bytes) -> str:
        # Temp names start with '.', which KEY_RE refuses: never an artifact name.
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
        try:
            os.fchmod(fd, _FILE_MODE)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                if self._fsync:
                    os.fsync(fh.fileno())
        except BaseException:
            os.unlink(tmp)
            raise
        return tmp

    def _publish(self, path: Path, data: bytes) -> bool:
        """Create `path` whole with `data`; False (and nothing written) if it already exists."""
        tmp = self._write_temp(path.parent, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        if self._fsync:
            fsync_dir(path.parent)
        return True

    def _hash_existing(self, path: Path, relpath: str) -> tuple[str, int]:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError as err:
            raise ArtifactMissing(f"no file at {path}: write {relpath!r} inside the run folder first") from err
        if not stat.S_ISREG(mode):
            raise ArtifactConflict(f"{path} is not a regular file (folder or symlink); artifacts are plain files")
        return hash_file(path)

    def _same_or_conflict(self, run_id: str, record: IndexRecord, sha: str, size: int) -> ArtifactRef:
        if (record.sha256, record.size_bytes) != (sha, size):
            raise ArtifactConflict(
                f"{make_uri(run_id, record.path)} is recorded with sha256 {record.sha256} ({record.size_bytes} "
                f"bytes), not {sha} ({size} bytes); artifacts are write-once: use another path"
            )
        return _ref(run_id, record)

    def _index_dir(self, run_id: str) -> Path:
        return self.run_dir(run_id) / INDEX_DIR

    def _record(self, run_id: str, relpath: str, sha: str, size: int) -> ArtifactRef:
        index = self._index_dir(run_id)
        index.mkdir(parents=True, exist_ok=True)
        record = IndexRecord(path=relpath, sha256=sha, size_bytes=size)
        if self._publish(index / index_name(relpath), canonical_json(record)):
            return _ref(run_id, record)
        # Another writer recorded it first; agree with it or conflict.
        existing = self._read_record(run_id, relpath)
        if existing is None:
            raise ArtifactCorrupt(f"index record of {relpath!r} vanished while being written; retry")
        return self._same_or_conflict(run_id, existing, sha, size)

    def _read_record(self, run_id: str, relpath: str) -> IndexRecord | None:
        path = self._index_dir(run_id) / index_name(relpath)
        try:
            record = _parse_record(path.read_bytes(), path)
        except FileNotFoundError:
            return None
        if record.path != relpath:
            raise ArtifactCorrupt(f"index record {path} names {record.path!r}, not {relpath!r}")
        return record

    def _records(self, run_id: str) -> list[IndexRecord]:
        index = self._index_dir(run_id)
        try:
            names = [n for n in os.listdir(index) if not n.startswith(".")]
        except FileNotFoundError:
            return []
        records = [_parse_record((index / n).read_bytes(), index / n) for n in names]
        return sorted(records, key=lambda r: r.path)


def _is_run_id(name: str) -> bool:
    try:
        validate_run_id(name)
    except InvalidPath:
        return False
    return True


def _ref(run_id: str, record: IndexRecord) -> ArtifactRef:
    return ArtifactRef(uri=make_uri(run_id, record.path), sha256=record.sha256, size_bytes=record.size_bytes)


def _parse_record(data: bytes, path: Path) -> IndexRecord:
    try:
        return IndexRecord.model_validate_json(data)
    except ValidationError as err:
        raise ArtifactCorrupt(f"index record {path} is unreadable: {err}") from err


def hash_file(path: Path) -> tuple[str, int]:
    """sha256 and size of a file, read in 1 MiB chunks (trainer outputs can be GBs)."""
    digest = hashlib.sha256()
    size = 0
    buf = bytearray(_CHUNK_BYTES)
    view = memoryview(buf)
    with open(path, "rb") as fh:
        while n := fh.readinto(buf):
            digest.update(view[:n])
            size += n
    return digest.hexdigest(), size

