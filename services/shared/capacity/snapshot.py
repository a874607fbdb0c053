"""Writing a capacity check into the evidence bundle: its raw outputs and `snapshot.json`.

Artifacts are write-once, so every check gets a fresh `check_id` (UTC time + random suffix) and a
repeated check never rewrites an earlier one (docs/capacity.md#evidence has the layout).
"""

from __future__ import annotations

import secrets

from contracts import layout
from contracts.campaign import CapacitySpec
from contracts.envelope import ArtifactRef
from services.runtime.bundle.bundle import BundleStore
from services.shared.capacity.model import CapacitySnapshot, CaptureRecord, Verdict
from services.shared.secret_args import mask_argv


def new_check_id(verdict: Verdict) -> str:
    return f"{verdict.checked_at:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def write_snapshot(
    bundle: BundleStore, verdict: Verdict, spec: CapacitySpec, *, folder: str = layout.CAPACITY_DIR
) -> ArtifactRef:
    """Store every raw output and the snapshot; return the snapshot's ref."""
    check_id = new_check_id(verdict)
    base = layout.capacity_check(folder, check_id)
    records = []
    for number, capture in enumerate(verdict.captures, 1):
        stdout = layout.capacity_raw(base, number, capture.name, "stdout")
        stderr = layout.capacity_raw(base, number, capture.name, "stderr")
        records.append(
            CaptureRecord(
                name=capture.name,
                source=capture.source,
                argv=capture.argv,
                exit_code=capture.exit_code,
                timed_out=capture.timed_out,
                duration_s=capture.duration_s,
                stdout=bundle.write_bytes(verdict.run_id, stdout, capture.stdout.encode()),
                stderr=bundle.write_bytes(verdict.run_id, stderr, capture.stderr.encode()),
            )
        )
    snapshot = CapacitySnapshot(
        run_id=verdict.run_id,
        check_id=check_id,
        scheduler=verdict.scheduler,
        selectors=verdict.selectors,
        idle_check=mask_argv(spec.idle_check.root) if spec.idle_check else [],  # a credential's value masked
        asked_node=verdict.asked_node,
        node=verdict.node,
        idle=verdict.idle,
        reasons=verdict.reasons,
        nodes=verdict.nodes,
        verdicts=verdict.verdicts,
        idle_check_skipped=verdict.idle_check_skipped,
        captures=records,
        checked_at=verdict.checked_at,
    )
    return bundle.write_json(verdict.run_id, layout.capacity_snapshot(base), snapshot)
