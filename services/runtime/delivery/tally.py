"""A step's deliveries from the bundle and its dead letters, counted where they outlive Redis: the run's bundle.

A log of write-once, numbered records per step (attempt, dead, replayed), read from the names alone, in
order: a later record supersedes an earlier one, none is changed or deleted. Two writers racing for one
number meet the bundle's write-once check; the loser reads the log again and takes the next
(docs/delivery.md, "Dead steps stay dead").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from contracts.envelope import utc_now
from services.runtime.bundle.bundle import ArtifactConflict, BundleStore
from services.runtime.bundle.bundle_paths import parse_uri

TALLY_DIR = "deliveries"
_NAME = re.compile(r"^(?P<seq>\d{6})-(?P<what>attempt|dead|replayed)(?:-(?P<letter>[A-Za-z0-9_-]+))?\.json$")
# Attempts to take the next number when other writers keep taking it first.
_WRITE_TRIES = 20


@dataclass(frozen=True)
class Tally:
    """A step's deliveries from the bundle since it was last replayed, and its standing dead letter."""

    attempts: int = 0
    dead: str | None = None  # the dead letter's ID while the step is dead-lettered and not replayed
    next_seq: int = 1


def folder(service: str, schema: str, step_key: str) -> str:
    return f"{TALLY_DIR}/{service}/{schema}/{step_key}"


def run_paths(bundle: BundleStore, run_id: str) -> list[str]:
    """The run's recorded artifact paths (read once per run by catch-up)."""
    return [parse_uri(ref.uri)[1] for ref in bundle.artifacts(run_id)]


def tally_of(paths: Iterable[str], service: str, schema: str, step_key: str) -> Tally:
    """The step's tally from a run's artifact paths."""
    prefix = folder(service, schema, step_key) + "/"
    entries = []
    for path in paths:
        if path.startswith(prefix) and (match := _NAME.match(path[len(prefix):])):
            entries.append((int(match["seq"]), match["what"], match["letter"]))
    attempts, dead, last = 0, None, 0
    for seq, what, letter in sorted(entries):
        last = seq
        if what == "attempt":
            attempts += 1
        elif what == "dead":
            dead = letter
        else:  # replayed: the operator asked for the step again; it starts afresh
            attempts, dead = 0, None
    return Tally(attempts=attempts, dead=dead, next_seq=last + 1)


def _append(bundle: BundleStore, run_id: str, *, service: str, schema: str, step_key: str, what: str,
            body: dict[str, str], unless_dead: bool = False) -> Tally | None:
    """Write the next record of the step's log; the tally it was written on (None: the step is dead
    and `unless_dead` asked not to write)."""
    for _ in range(_WRITE_TRIES):
        tally = tally_of(run_paths(bundle, run_id), service, schema, step_key)
        if unless_dead and tally.dead is not None:
            return None
        relpath = f"{folder(service, schema, step_key)}/{tally.next_seq:06d}-{what}.json"
        try:
            bundle.write_json(run_id, relpath, {**body, "at": utc_now().isoformat()})
        except ArtifactConflict:
            continue  # another writer took this number: read the log again
        return tally
    raise ArtifactConflict(f"could not append to {folder(service, schema, step_key)} of run {run_id}: "
                           f"{_WRITE_TRIES} other writers came first")


def record_attempt(bundle: BundleStore, run_id: str, *, service: str, schema: str, step_key: str,
                   instance: str) -> int | None:
    """Count one delivery from the bundle; the step's deliveries with this one, or None when it is dead-lettered
    (it is then not run)."""
    tally = _append(bundle, run_id, service=service, schema=schema, step_key=step_key, what="attempt",
                    body={"instance": instance}, unless_dead=True)
    return None if tally is None else tally.attempts + 1


def record_dead(bundle: BundleStore, run_id: str, *, service: str, schema: str, step_key: str, dead_letter_id: str,
                kind: str) -> None:
    """Mark the step dead-lettered: catch-up leaves it alone until that dead letter is replayed."""
    _append(bundle, run_id, service=service, schema=schema, step_key=step_key, what=f"dead-{dead_letter_id}",
            body={"kind": kind})


def record_replay(bundle: BundleStore, run_id: str, dead_letter_id: str, by: str) -> bool:
    """Supersede the step's dead mark of `dead_letter_id` (`specdec dlq replay`); False when the run's bundle
    holds no such mark (a dead letter of an invalid payload, or one from before steps were marked)."""
    suffix = f"-dead-{dead_letter_id}.json"
    for path in run_paths(bundle, run_id):
        if path.startswith(TALLY_DIR + "/") and path.endswith(suffix):
            service, schema, step_key = path[len(TALLY_DIR) + 1:].rsplit("/", 1)[0].split("/", 2)
            _append(bundle, run_id, service=service, schema=schema, step_key=step_key,
                    what=f"replayed-{dead_letter_id}", body={"by": by})
            return True
    return False
