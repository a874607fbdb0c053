"""The evidence bundle store: write-once artifacts, path rules, manifest, events journal."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import random
from pathlib import Path

import orjson
import pytest

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from services.runtime.bundle.bundle import (
    ArtifactConflict,
    ArtifactCorrupt,
    ArtifactMissing,
    BundleError,
    BundleStore,
    InvalidContent,
    InvalidPath,
)

RUN = "run-0001"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "bundles"  # deliberately not created: the store must create it


@pytest.fixture
def store(root: Path) -> BundleStore:
    return BundleStore(root)


def _campaign() -> Campaign:
    return Campaign.model_validate(
        {
            "family": "tiny",
            "target": {"checkpoint": "/models/tiny"},
            "standing": None,
            "traffic": {"shapes": ["chat-short"]},
            "commands": {"serve": "builtin", "bench": "builtin", "eval": "builtin"},
            "capacity": {"idle_check": ["true"]},
            "matrix": {
                "cells": [
                    {"cell_id": "standing", "role": "standing"},
                    {
                        "cell_id": "ngram-k4",
                        "role": "candidate",
                        "serving": {"speculative": {"method": "ngram", "num_speculative_tokens": 4}},
                    },
                ]
            },
            "gate": {"objective": "tpot", "acceptance_floor": 0.5},
            "source_revisions": {"target": "abc123", "specdec": "deadbeef"},
        }
    )


def _all_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def _event(event_id: str, **extra: object) -> bytes:
    return orjson.dumps({"event_id": event_id, "schema": "test.happened", **extra})


# --- construction, runs -------------------------------------------------------


def test_construction_and_run_dir_touch_nothing(store: BundleStore, root: Path) -> None:
    assert store.run_dir(RUN) == root / RUN
    assert not store.exists(RUN)
    assert store.list_runs() == []
    assert not root.exists()


def test_create_run_is_idempotent_and_listed(store: BundleStore, root: Path) -> None:
    assert store.create_run(RUN) == root / RUN
    assert store.create_run(RUN) == root / RUN
    store.create_run("run-0002")
    (root / "not_a_run").mkdir()  # not a valid run ID: ignored by list_runs
    assert store.exists(RUN)
    assert store.list_runs() == [RUN, "run-0002"]


def test_errors_share_one_root() -> None:
    for error in (InvalidPath, ArtifactConflict, ArtifactMissing, ArtifactCorrupt, InvalidContent):
        assert issubclass(error, BundleError)


# --- write-once -----------------------------------------------------------------


def test_write_bytes_hash_size_uri_and_content(store: BundleStore, root: Path) -> None:
    data = b"hello evidence\n" * 1000
    ref = store.write_bytes(RUN, "profile/summary.txt", data)
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert ref.size_bytes == len(data)
    assert ref.uri == f"bundle://{RUN}/profile/summary.txt"
    assert (root / RUN / "profile" / "summary.txt").read_bytes() == data
    assert store.read_bytes(RUN, "profile/summary.txt") == data
    assert store.ref(RUN, "profile/summary.txt") == ref


def test_same_bytes_is_idempotent_other_bytes_conflict(store: BundleStore, root: Path) -> None:
    first = store.write_bytes(RUN, "gate/decision.txt", b"promote")
    assert store.write_bytes(RUN, "gate/decision.txt", b"promote") == first
    with pytest.raises(ArtifactConflict, match="write-once"):
        store.write_bytes(RUN, "gate/decision.txt", b"reject")
    assert (root / RUN / "gate" / "decision.txt").read_bytes() == b"promote"
    assert store.artifacts(RUN) == [first]


def test_unrecorded_existing_file_is_adopted_or_conflicts(store: BundleStore, root: Path) -> None:
    # A crash between publishing the file and recording it leaves an unrecorded file:
    # the retry with the same bytes records it, other bytes conflict.
    store.create_run(RUN)
    (root / RUN / "left.txt").write_bytes(b"same")
    (root / RUN / "other.txt").write_bytes(b"old")
    assert store.write_bytes(RUN, "left.txt", b"same").sha256 == hashlib.sha256(b"same").hexdigest()
    with pytest.raises(ArtifactConflict):
        store.write_bytes(RUN, "other.txt", b"new")
    assert [r.uri.rsplit("/", 1)[1] for r in store.artifacts(RUN)] == ["left.txt"]


def test_adopt_records_a_file_left_without_its_record(store: BundleStore, root: Path) -> None:
    # A kill between the file's link and its index record: the file is whole (published by link),
    # so adopt records it as it is; a path with no file is None, a recorded one its ref.
    store.create_run(RUN)
    assert store.adopt(RUN, "training/capture.json") is None
    (root / RUN / "training").mkdir()
    (root / RUN / "training" / "capture.json").write_bytes(b'{"exit_code": 0}')
    with pytest.raises(ArtifactMissing):
        store.ref(RUN, "training/capture.json")
    adopted = store.adopt(RUN, "training/capture.json")
    assert adopted is not None and adopted.sha256 == hashlib.sha256(b'{"exit_code": 0}').hexdigest()
    assert store.ref(RUN, "training/capture.json") == adopted == store.adopt(RUN, "training/capture.json")


def test_file_in_the_way_of_a_folder_conflicts(store: BundleStore) -> None:
    store.write_bytes(RUN, "a", b"x")
    with pytest.raises(ArtifactConflict):
        store.write_bytes(RUN, "a/b", b"y")


def test_write_json_is_canonical(store: BundleStore, root: Path) -> None:
    ref = store.write_json(RUN, "corpus/stats.json", {"b": 1, "a": [1, 2]})
    expected = orjson.dumps({"a": [1, 2], "b": 1}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    assert (root / RUN / "corpus" / "stats.json").read_bytes() == expected
    # Same data in another key order: the same bytes, so a retry is a no-op.
    assert store.write_json(RUN, "corpus/stats.json", {"a": [1, 2], "b": 1}) == ref
    assert store.read_json(RUN, "corpus/stats.json") == {"a": [1, 2], "b": 1}


def test_write_json_accepts_models_and_nested_models(store: BundleStore) -> None:
    inner = ArtifactRef(uri="bundle://run-0001/x", sha256="0" * 64, size_bytes=3)
    store.write_json(RUN, "model.json", inner)
    store.write_json(RUN, "nested.json", {"refs": [inner]})
    assert store.read_json(RUN, "model.json") == inner.model_dump(mode="json")
    assert store.read_json(RUN, "nested.json") == {"refs": [inner.model_dump(mode="json")]}
    with pytest.raises(InvalidContent):
        store.write_json(RUN, "bad.json", {"x": object()})


def test_reserved_names_only_at_top_level(store: BundleStore) -> None:
    store.write_bytes(RUN, "bench/events.jsonl", b"{}\n")
    store.write_bytes(RUN, "report/manifest.json", b"{}\n")
    assert len(store.artifacts(RUN)) == 2


# --- path validation ------------------------------------------------------------

BAD_RELPATHS = [
    "../escape",
    "a/../../escape",
    "/etc/passwd",
    "",
    "a//b",
    "a/",
    "./a",
    "a/./b",
    ".hidden",
    "a\\b",
    "a\nb",
    "a\n",
    "a b",
    "x" * 129,
    "events.jsonl",
    "manifest.json",
    ".index/abc.json",
]
BAD_RUN_IDS = ["Run-1", "r", "../up", "-abc", "abc-", "run_1", "run-1\n", "a" * 64, "", "run/1"]


@pytest.mark.parametrize("relpath", BAD_RELPATHS)
def test_bad_relpath_rejected_before_disk(store: BundleStore, root: Path, relpath: str) -> None:
    for call in (
        lambda: store.write_bytes(RUN, relpath, b"x"),
        lambda: store.write_json(RUN, relpath, {"x": 1}),
        lambda: store.register_file(RUN, relpath),
        lambda: store.read_bytes(RUN, relpath),
        lambda: store.ref(RUN, relpath),
        lambda: store.resolve(f"bundle://{RUN}/{relpath}"),
    ):
        with pytest.raises(InvalidPath):
            call()
    assert not root.exists()


@pytest.mark.parametrize("run_id", BAD_RUN_IDS)
def test_bad_run_id_rejected_before_disk(store: BundleStore, root: Path, run_id: str) -> None:
    for call in (
        lambda: store.run_dir(run_id),
        lambda: store.create_run(run_id),
        lambda: store.exists(run_id),
        lambda: store.write_bytes(run_id, "a.txt", b"x"),
        lambda: store.append_event(run_id, "e1", _event("e1")),
        lambda: store.rebuild_manifest(run_id),
        lambda: store.artifacts(run_id),
    ):
        with pytest.raises(InvalidPath):
            call()
    assert not root.exists()


def test_symlink_escaping_the_run_folder_is_rejected(store: BundleStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"not evidence")
    run_dir = store.create_run(RUN)
    (run_dir / "link").symlink_to(outside)
    with pytest.raises(InvalidPath, match="symlink"):
        store.write_bytes(RUN, "link/new.txt", b"x")
    with pytest.raises(InvalidPath):
        store.register_file(RUN, "link/secret.txt")
    with pytest.raises(InvalidPath):
        store.resolve(f"bundle://{RUN}/link/secret.txt")
    assert _all_files(outside) == ["secret.txt"]
    assert store.artifacts(RUN) == []


def test_run_folder_that_is_a_symlink_is_rejected(store: BundleStore, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    root.mkdir()
    (root / RUN).symlink_to(outside)
    with pytest.raises(InvalidPath):
        store.write_bytes(RUN, "a.txt", b"x")
    with pytest.raises(InvalidPath):
        store.append_event(RUN, "e1", _event("e1"))
    assert list(outside.iterdir()) == []
    assert not store.exists(RUN)
    assert store.list_runs() == []


def test_symlink_inside_the_run_folder_is_allowed(store: BundleStore) -> None:
    run_dir = store.create_run(RUN)
    (run_dir / "real").mkdir()
    (run_dir / "alias").symlink_to(run_dir / "real")
    store.write_bytes(RUN, "alias/a.txt", b"x")
    assert (run_dir / "real" / "a.txt").read_bytes() == b"x"


# --- resolve ----------------------------------------------------------------------


def test_resolve_uris(store: BundleStore, root: Path) -> None:
    ref = store.write_bytes(RUN, "bench/cell-a/trial-1/results.json", b"{}")
    path = store.resolve(ref.uri)
    assert path.is_absolute()
    assert path == (root / RUN / "bench/cell-a/trial-1/results.json").absolute()
    assert path.read_bytes() == b"{}"
    # An artifact not written yet still resolves (a service may be about to write it).
    assert store.resolve(f"bundle://{RUN}/later.json") == (root / RUN / "later.json").absolute()
    for uri in ("file:///etc/passwd", f"bundle://{RUN}", f"bundle://{RUN}/", "bundle://BAD/x", f"bundle:/{RUN}/x"):
        with pytest.raises(InvalidPath):
            store.resolve(uri)


# --- register_file, corruption --------------------------------------------------


def test_register_large_file(store: BundleStore) -> None:
    run_dir = store.create_run(RUN)
    data = random.Random(7).randbytes(5 * (1 << 20) + 123)  # not a multiple of the 1 MiB chunk
    (run_dir / "training" / "output").mkdir(parents=True)
    target = run_dir / "training" / "output" / "model.safetensors"
    target.write_bytes(data)
    ref = store.register_file(RUN, "training/output/model.safetensors")
    assert ref.sha256 == hashlib.sha256(data).hexdigest()
    assert ref.size_bytes == len(data)
    assert store.register_file(RUN, "training/output/model.safetensors") == ref
    # The trainer (or anyone) rewrites the file afterwards: re-registering conflicts, reading fails.
    target.write_bytes(data[:-1] + b"\0")
    with pytest.raises(ArtifactConflict):
        store.register_file(RUN, "training/output/model.safetensors")
    with pytest.raises(ArtifactCorrupt):
        store.read_bytes(RUN, "training/output/model.safetensors")


def test_register_missing_or_non_file(store: BundleStore) -> None:
    run_dir = store.create_run(RUN)
    with pytest.raises(ArtifactMissing):
        store.register_file(RUN, "nothing.bin")
    (run_dir / "folder").mkdir()
    with pytest.raises(ArtifactConflict):
        store.register_file(RUN, "folder")


def test_corrupt_detection(store: BundleStore, root: Path) -> None:
    store.write_bytes(RUN, "profile/p.txt", b"abcdef")
    path = root / RUN / "profile" / "p.txt"
    path.write_bytes(b"abcdeX")  # same size, other bytes
    with pytest.raises(ArtifactCorrupt, match="changed on disk"):
        store.read_bytes(RUN, "profile/p.txt")
    assert store.read_bytes(RUN, "profile/p.txt", verify=False) == b"abcdeX"
    path.unlink()
    with pytest.raises(ArtifactCorrupt, match="gone"):
        store.read_bytes(RUN, "profile/p.txt")


def test_missing_artifact(store: BundleStore) -> None:
    with pytest.raises(ArtifactMissing):
        store.ref(RUN, "nope.json")
    with pytest.raises(ArtifactMissing):
        store.read_bytes(RUN, "nope.json")
    assert store.artifacts(RUN) == []


# --- manifest ---------------------------------------------------------------------


def test_manifest_contents(store: BundleStore, root: Path) -> None:
    campaign = _campaign()
    refs = [
        store.write_json(RUN, "campaign.json", campaign),
        store.write_bytes(RUN, "profile/summary.json", b'{"p": 1}\n'),
        store.write_bytes(RUN, "bench/cell-a/trial-1/server.log", b"log line\n"),
    ]
    store.append_event(RUN, "e1", _event("e1"))
    path = store.rebuild_manifest(RUN)
    assert path == root / RUN / "manifest.json"
    manifest = orjson.loads(path.read_bytes())
    assert manifest["run_id"] == RUN
    assert manifest["commands"] == campaign.model_dump(mode="json", by_alias=True)["commands"]
    assert manifest["source_revisions"] == {"target": "abc123", "trainer": None, "serving": None, "specdec": "deadbeef",
                                            "suffix_decoding": None}
    expected = sorted(
        ({"path": r.uri.split("/", 3)[3], "sha256": r.sha256, "size_bytes": r.size_bytes} for r in refs),
        key=lambda a: str(a["path"]),
    )
    assert manifest["artifacts"] == expected
    assert store.read_manifest(RUN).run_id == RUN
    # manifest.json and events.jsonl are not artifacts; no temp file is left behind.
    with pytest.raises(InvalidPath):
        store.ref(RUN, "manifest.json")
    assert not [n for n in _all_files(root / RUN) if ".tmp" in n]


def test_manifest_without_campaign_has_nulls_and_follows_new_artifacts(store: BundleStore) -> None:
    store.write_bytes(RUN, "a.txt", b"a")
    first = orjson.loads(store.rebuild_manifest(RUN).read_bytes())
    assert first["commands"] is None and first["source_revisions"] is None
    assert [a["path"] for a in first["artifacts"]] == ["a.txt"]
    store.write_bytes(RUN, "b.txt", b"b")
    second = orjson.loads(store.rebuild_manifest(RUN).read_bytes())
    assert [a["path"] for a in second["artifacts"]] == ["a.txt", "b.txt"]


def test_manifest_rebuild_is_atomic(store: BundleStore, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.write_bytes(RUN, "a.txt", b"a")
    before = store.rebuild_manifest(RUN).read_bytes()
    store.write_bytes(RUN, "b.txt", b"b")

    def failing_replace(src: str, dst: str) -> None:
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated"):
        store.rebuild_manifest(RUN)
    assert (root / RUN / "manifest.json").read_bytes() == before
    assert [n for n in os.listdir(root / RUN) if n.startswith(".tmp")] == []


def test_corrupt_campaign_stops_the_manifest(store: BundleStore, root: Path) -> None:
    store.write_json(RUN, "campaign.json", _campaign())
    (root / RUN / "campaign.json").write_bytes(b'{"commands": {"forged": true}}\n')
    with pytest.raises(ArtifactCorrupt):
        store.rebuild_manifest(RUN)


# --- events -----------------------------------------------------------------------


def test_append_event_dedupes(store: BundleStore) -> None:
    assert store.append_event(RUN, "e1", _event("e1", n=1)) is True
    assert store.append_event(RUN, "e1", _event("e1", n=1)) is False
    assert store.append_event(RUN, "e2", _event("e2", n=2) + b"\n") is True
    assert store.events(RUN) == [
        {"event_id": "e1", "schema": "test.happened", "n": 1},
        {"event_id": "e2", "schema": "test.happened", "n": 2},
    ]
    assert store.events("run-empty") == []


def test_append_event_dedupes_across_instances(root: Path) -> None:
    a, b = BundleStore(root), BundleStore(root)
    assert a.append_event(RUN, "e1", _event("e1")) is True
    assert b.append_event(RUN, "e1", _event("e1")) is False  # b loads the file lazily
    assert b.append_event(RUN, "e2", _event("e2")) is True
    assert a.append_event(RUN, "e2", _event("e2")) is False  # a catches up on b's append
    assert [e["event_id"] for e in BundleStore(root).events(RUN)] == ["e1", "e2"]


def test_append_event_rejects_bad_lines(store: BundleStore, root: Path) -> None:
    for event_id, line in (
        ("e1", _event("other")),
        ("e1", b"not json"),
        ("e1", b"[1, 2]"),
        ("e1", orjson.dumps({"event_id": "e1"}, option=orjson.OPT_INDENT_2)),
        ("", _event("")),
    ):
        with pytest.raises(InvalidContent):
            store.append_event(RUN, event_id, line)
    assert not (root / RUN / "events.jsonl").exists()


def test_torn_line_is_kept_aside_and_its_event_named_missing(store: BundleStore, root: Path) -> None:
    store.append_event(RUN, "e1", _event("e1"))
    with open(root / RUN / "events.jsonl", "ab") as fh:
        fh.write(b'{"event_id": "e2", "sch')  # a writer died mid-line
    fresh = BundleStore(root)
    assert fresh.append_event(RUN, "e3", _event("e3")) is True
    scan = fresh.scan_events(RUN)
    assert [e["event_id"] for e in scan.events] == ["e1", "e3"]
    assert scan.bad_lines == [] and scan.missing == ["e2"]
    assert (root / RUN / "events.torn.jsonl").read_bytes().count(b"\n") == 1


def _append_worker(root: str, ids: list[str], barrier: multiprocessing.synchronize.Barrier) -> int:
    store = BundleStore(Path(root))
    barrier.wait()
    return sum(store.append_event(RUN, i, _event(i, pad="x" * 2000)) for i in ids)


def _append_entry(root: str, ids: list[str], barrier, results) -> None:
    results.put(_append_worker(root, ids, barrier))


def test_append_event_across_processes(root: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    ids = [f"event-{n:04d}" for n in range(60)]
    n_procs = 4
    barrier, results = ctx.Barrier(n_procs), ctx.Queue()
    procs = []
    for seed in range(n_procs):
        order = ids[:]
        random.Random(seed).shuffle(order)  # every process appends every id, in its own order
        procs.append(ctx.Process(target=_append_entry, args=(str(root), order, barrier, results)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    appended = [results.get(timeout=5) for _ in procs]
    assert sum(appended) == len(ids)
    raw_lines = (root / RUN / "events.jsonl").read_bytes().split(b"\n")
    assert raw_lines[-1] == b""
    parsed = [orjson.loads(line) for line in raw_lines[:-1]]  # a torn line would fail to parse
    assert sorted(e["event_id"] for e in parsed) == ids
    assert all(e["pad"] == "x" * 2000 for e in parsed)


def _write_entry(root: str, data: bytes, barrier, results) -> None:
    store = BundleStore(Path(root))
    barrier.wait()
    try:
        results.put(("ok", store.write_bytes(RUN, "race/out.bin", data).sha256))
    except ArtifactConflict:
        results.put(("conflict", None))


@pytest.mark.parametrize("same_bytes", [True, False])
def test_write_race_across_processes(root: Path, same_bytes: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    n_procs = 4
    barrier, results = ctx.Barrier(n_procs), ctx.Queue()
    payloads = [b"same" * 10000 if same_bytes else f"proc {n}".encode() * 10000 for n in range(n_procs)]
    procs = [ctx.Process(target=_write_entry, args=(str(root), d, barrier, results)) for d in payloads]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    outcomes = [results.get(timeout=5) for _ in procs]
    winners = [sha for kind, sha in outcomes if kind == "ok"]
    if same_bytes:
        assert winners == [hashlib.sha256(payloads[0]).hexdigest()] * n_procs
    else:
        assert len(winners) == 1
    store = BundleStore(root)
    on_disk = store.read_bytes(RUN, "race/out.bin")
    assert hashlib.sha256(on_disk).hexdigest() == winners[0]
    assert [n for n in os.listdir(root / RUN / "race") if n.startswith(".tmp")] == []
