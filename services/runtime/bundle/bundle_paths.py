"""Errors of the evidence bundle, and the pure rules that turn IDs into bundle paths.

Nothing here touches the disk: every path is checked here before any I/O, so a
bad run ID or relative path fails before a directory is created or a file opened.
"""

from __future__ import annotations

from contracts import layout
from contracts.envelope import KEY_RE, RUN_ID_RE
from services.runtime.errors import SpecdecError

URI_SCHEME = "bundle://"
EVENTS_NAME = layout.EVENTS
MANIFEST_NAME = layout.MANIFEST
INDEX_DIR = layout.INDEX_DIR
# Top-level names the store owns: an artifact may not take them. (`.index`
# already fails KEY_RE; it is listed so the rule reads in one place.)
RESERVED_NAMES = frozenset({EVENTS_NAME, MANIFEST_NAME, INDEX_DIR})
# Components are <= 128 characters each (KEY_RE); the whole relative path is
# capped well under PATH_MAX so the root and run ID always fit in front of it.
MAX_RELPATH_CHARS = 1024


class BundleError(SpecdecError):
    """Root of every evidence-bundle error."""


class InvalidPath(BundleError):
    """A run ID, relative path or URI is not one the bundle accepts."""


class ArtifactConflict(BundleError):
    """An artifact already exists with other bytes: artifacts are write-once."""


class ArtifactMissing(BundleError):
    """The artifact was never recorded in the run's bundle."""


class ArtifactCorrupt(BundleError):
    """The artifact's bytes (or its index record) no longer match what was recorded."""


class InvalidContent(BundleError):
    """The data cannot be stored as asked (not JSON-serialisable, not one JSON line, ...)."""


def validate_run_id(run_id: object) -> str:
    """Return `run_id` if it matches RUN_ID_RE in full, else raise InvalidPath."""
    # fullmatch, not match: RUN_ID_RE ends in `$`, which re.match lets through
    # before a trailing newline ("run-1\n" would otherwise pass).
    if not isinstance(run_id, str) or RUN_ID_RE.fullmatch(run_id) is None:
        raise InvalidPath(
            f"invalid run ID {run_id!r}: use 3-63 characters of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit"
        )
    return run_id


def validate_relpath(relpath: object) -> str:
    """Return `relpath` if it is a valid artifact path, else raise InvalidPath.

    Valid: components matching KEY_RE joined by single '/', no leading '/', no
    '.' or '..' (KEY_RE refuses a leading '.'), and a first component that is
    not one of the store's reserved names.
    """
    if not isinstance(relpath, str) or not relpath:
        raise InvalidPath(
            f"invalid artifact path {relpath!r}: give a non-empty relative path such as 'gate/decision.json'"
        )
    if len(relpath) > MAX_RELPATH_CHARS:
        raise InvalidPath(f"artifact path of {len(relpath)} characters is too long (max {MAX_RELPATH_CHARS})")
    if relpath.startswith("/"):
        raise InvalidPath(f"artifact path {relpath!r} is absolute: give a path relative to the run's bundle")
    parts = relpath.split("/")
    for part in parts:
        if KEY_RE.fullmatch(part) is None:
            raise InvalidPath(
                f"invalid component {part!r} in artifact path {relpath!r}: each component is 1-128 characters "
                "of A-Z a-z 0-9 _ . -, starting with a letter or digit ('..', '.' and empty components are refused)"
            )
    if parts[0] in RESERVED_NAMES:
        raise InvalidPath(f"{parts[0]!r} is reserved by the bundle store and cannot be written as an artifact")
    return relpath


def make_uri(run_id: str, relpath: str) -> str:
    return f"{URI_SCHEME}{validate_run_id(run_id)}/{validate_relpath(relpath)}"


def parse_uri(uri: object) -> tuple[str, str]:
    """Split `bundle://<run_id>/<relpath>` into a validated (run_id, relpath)."""
    if not isinstance(uri, str) or not uri.startswith(URI_SCHEME):
        raise InvalidPath(f"invalid bundle URI {uri!r}: expected bundle://<run_id>/<relative path>")
    rest = uri[len(URI_SCHEME) :]
    run_id, sep, relpath = rest.partition("/")
    if not sep:
        raise InvalidPath(f"bundle URI {uri!r} names no artifact: expected bundle://<run_id>/<relative path>")
    return validate_run_id(run_id), validate_relpath(relpath)
