"""Runs in a bundle root, built by the real profile and corpus steps, for the
checks of a request's named inputs (contracts/inputs.py) and of a training
input's provenance:

- RUN: the sample traffic, profiled, its corpus built; capacity selected a node;
- OTHER_RUN: another traffic (half of the sample), profiled, its corpus built;
  two drafts under its training folder;
- THIRD_RUN: RUN's own profile (the same bytes), a corpus drawn with another seed.

`copy_of` gives a scratch copy: planning a training writes its splits write-once.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import layout
from contracts.envelope import ArtifactRef
from contracts.events import CapacitySelected, ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from tests.unit.guard.context import OTHER_RUN, RUN, Ctx

THIRD_RUN = "toy-20261130-030303-abcabc"
DRAFTS = ("training/output/model.safetensors", "training/output-b/model.safetensors")


@dataclass(frozen=True)
class Runs:
    root: Path
    campaign: Any  # RUN's campaign (the example, traffic file, builtin, local)

    def copy_of(self, ctx: Ctx) -> BundleStore:
        ctx.counter += 1
        dest = ctx.tmp / f"runs-copy-{ctx.counter}"
        shutil.copytree(self.root, dest, symlinks=True)
        return BundleStore(dest, fsync=False)

    @property
    def bundle(self) -> BundleStore:
        return BundleStore(self.root, fsync=False)

    def ref(self, run_id: str, relpath: str) -> ArtifactRef:
        return self.bundle.ref(run_id, relpath)


def runs(ctx: Ctx) -> Runs:
    cache = ctx.cache("runs")
    if "runs" not in cache:
        cache["runs"] = _build(ctx)
    return cache["runs"]


def _build(ctx: Ctx) -> Runs:
    from services.corpus.app import run_corpus
    from services.profiler.app import run_profile
    from tests.unit.guard.observe import Refused, submitted
    from tests.unit.guard.variants import VARIANTS

    root = ctx.tmp / "runs"
    bundle = BundleStore(root, fsync=False)
    data = VARIANTS[0].data()
    campaign = submitted(ctx, data)
    assert not isinstance(campaign, Refused), campaign
    other_data = VARIANTS[0].data()
    other_data["traffic"]["path"] = str(ctx.traffic_other)
    other = submitted(ctx, other_data)
    assert not isinstance(other, Refused), other
    third = campaign.model_copy(update={"corpus": campaign.corpus.model_copy(update={"seed": 11})})
    for run_id, camp in ((RUN, campaign), (OTHER_RUN, other), (THIRD_RUN, third)):
        bundle.write_json(run_id, layout.CAMPAIGN, camp)
        event = ProfileRequested(run_id=run_id, producer="guard", requested_by="guard")
        if run_id == THIRD_RUN:
            bundle.write_bytes(run_id, layout.PROFILE, bundle.read_bytes(RUN, layout.PROFILE))
        else:
            run_profile(bundle, event, "profiler/guard")
        run_corpus(bundle, event, "corpus/guard")
    for index, relpath in enumerate(DRAFTS):
        bundle.write_bytes(OTHER_RUN, relpath, f"draft {index}".encode())
    snapshot = bundle.write_json(RUN, f"{layout.CAPACITY_DIR}/snapshot.json", {"node": "node-a"})
    selected = CapacitySelected(run_id=RUN, producer="capacity/guard", scheduler="local", node="node-a",
                                snapshot=snapshot, corpus=bundle.ref(RUN, layout.CORPUS))
    bundle.append_event(RUN, selected.event_id, selected.to_json())
    return Runs(root=root, campaign=campaign)
