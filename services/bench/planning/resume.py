"""Resuming a bench step that an earlier delivery left half done.

Bundle artifacts are write-once and a trial measured again gives other bytes, so each execution is a
numbered attempt (a later one writes under `attempt-<n>/`), a recorded trial is adopted, not measured
again (its event re-emitted with the same ID), and a recorded rejected trial is adopted as the same
failure (docs/bench-runner.md#restarts)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from contracts import layout
from contracts.envelope import ArtifactRef
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.delivery.adopt import recorded


@dataclass(frozen=True)
class Adopted:
    """A trial an earlier attempt measured and recorded."""

    ref: ArtifactRef
    problems: list[str] = field(default_factory=list)
    # prompt_id -> generated text of the trial's successful requests (builtin bench only).
    outputs: dict[str, str] = field(default_factory=dict)
    # The recorded result itself (bench.trial.completed is emitted again from it: services/bench/trial.py).
    result: dict[str, Any] = field(default_factory=dict)


def begin_attempt(bundle: BundleStore, run_id: str) -> int:
    """Number and record this execution of the plan: 1 for the first."""
    attempt = 1 + len(list(bundle.run_dir(run_id).glob(layout.bench_attempt("*"))))
    bundle.write_json(run_id, layout.bench_attempt(attempt), {"attempt": attempt})
    return attempt


def adopt(bundle: BundleStore, run_id: str, cell_id: str, trial: int, *, concurrency: int) -> Adopted | None:
    """The recorded result of a trial, or None when it still has to be measured.

    A recorded rejected trial comes back with its problems (never empty), so the
    caller fails the cell again. A file the store published without its record (the
    writer died between the two) is recorded now and adopted (`adopt.recorded`)."""
    for relpath, rejected in ((layout.trial_result(cell_id, trial, concurrency), False),
                              (layout.rejected_result(cell_id, trial, concurrency), True)):
        # The runtime's adoption (services/runtime/delivery/adopt.py), per trial: whole steps are adopted the same way.
        try:
            found = recorded(bundle, run_id, relpath)
            if found is None:
                continue
            ref, result = found[0], json.loads(found[1])
        except (BundleError, ValueError) as exc:
            raise BundleError(
                f"the recorded result {relpath} of an earlier attempt cannot be read back: {exc}"
            ) from None
        problems = [str(p) for p in (result.get("speculation_problems") or []) if p] if isinstance(result, dict) else []
        if rejected and not problems:
            problems = [f"recorded as rejected by an earlier attempt ({relpath}) without its reasons"]
        if not isinstance(result, dict):
            return Adopted(ref=ref, problems=problems)
        return Adopted(ref=ref, problems=problems, outputs=outputs_of(result), result=result)
    return None


def outputs_of(result: dict) -> dict[str, str]:
    """prompt_id -> text of the successful requests of a builtin result (empty for an operator's)."""
    ids, texts, errors = result.get("prompt_ids"), result.get("generated_texts"), result.get("errors")
    if not isinstance(ids, list) or not isinstance(texts, list) or len(ids) != len(texts):
        return {}
    errors = errors if isinstance(errors, list) and len(errors) == len(ids) else [""] * len(ids)
    return {str(pid): str(text) for pid, text, error in zip(ids, texts, errors, strict=True) if not error}
