"""Profiler and corpus services through a real Redis, on the bundled sample traffic."""

from __future__ import annotations

import contextlib
from pathlib import Path

import orjson
import yaml

from contracts.campaign import Campaign
from contracts.events import CampaignSubmitted
from services.app.campaign.prepare import absolutize
from services.runtime.bundle.bundle import BundleStore
from tests.support.services import running, wait_events

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"


def campaign_with(**changes) -> Campaign:
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(changes)
    return absolutize(Campaign.model_validate(data), ROOT)


async def submit(service, bundle: BundleStore, run_id: str, campaign: Campaign) -> None:
    ref = bundle.write_json(run_id, "campaign.json", campaign)
    await service.bus.publish(CampaignSubmitted(run_id=run_id, producer="test", campaign=campaign, campaign_ref=ref))


async def test_traffic_is_profiled_and_a_redacted_corpus_is_built(settings):
    run_id = "toy-20261130-020202-abcdef"
    bundle = BundleStore(settings.bundle_root)
    campaign = campaign_with(corpus={"size": 120, "heldout_share": 0.1, "seed": 0})
    async with contextlib.AsyncExitStack() as stack:
        profiler = await stack.enter_async_context(running("profiler", settings))
        await stack.enter_async_context(running("corpus", settings))
        await submit(profiler, bundle, run_id, campaign)
        events = await wait_events(settings, {"profile.completed", "corpus.completed"}, run_id=run_id, timeout_s=120)
    profiled = events["profile.completed"]
    assert profiled["records_accepted"] > 500 and profiled["source"] == "traffic"
    profile = bundle.read_json(run_id, "profile/PROFILE.json")
    assert profile["records"]["accepted"] == profiled["records_accepted"]
    built = events["corpus.completed"]
    # --size is a target: strata with too few distinct prompts cap it (the manifest says by how much).
    assert 100 <= built["train_records"] + built["heldout_records"] <= 120
    corpus = bundle.read_bytes(run_id, "corpus/CORPUS.jsonl")
    assert built["corpus"]["sha256"] == bundle.ref(run_id, "corpus/CORPUS.jsonl").sha256
    text = corpus.decode()
    traffic = Path(campaign.traffic.path).read_text()
    # The sample traffic plants secrets; none may reach the bundle.
    assert "sk-" in traffic and "sk-" not in text
    manifest = bundle.read_json(run_id, "corpus/CORPUS.jsonl.manifest.json")
    assert manifest["records"]["heldout"] == built["heldout_records"]
    heldout = [orjson.loads(line) for line in bundle.read_bytes(run_id, "corpus/heldout.jsonl").splitlines()]
    assert len(heldout) == built["heldout_records"] and all(r["split"] == "heldout" for r in heldout)


async def test_shapes_only_campaign_records_the_corpus_as_skipped(settings):
    run_id = "toy-20261130-030303-abcdef"
    bundle = BundleStore(settings.bundle_root)
    data = yaml.safe_load(EXAMPLE.read_text())
    data["traffic"] = {"shapes": ["short", "medium"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["matrix"]["cells"] = [c for c in data["matrix"]["cells"] if c["cell_id"] != "draft-k3"]
    campaign = Campaign.model_validate(data)
    async with contextlib.AsyncExitStack() as stack:
        profiler = await stack.enter_async_context(running("profiler", settings))
        await stack.enter_async_context(running("corpus", settings))
        await submit(profiler, bundle, run_id, campaign)
        events = await wait_events(settings, {"profile.completed", "corpus.completed"}, run_id=run_id)
    assert events["profile.completed"]["source"] == "shapes"
    assert "shapes-only" in events["corpus.completed"]["skipped_reason"]
    assert events["corpus.completed"]["corpus"] is None


async def test_missing_traffic_file_fails_the_profile_step(settings, tmp_path):
    run_id = "toy-20261130-040404-abcdef"
    bundle = BundleStore(settings.bundle_root)
    campaign = campaign_with(traffic={"path": str(tmp_path / "nope.jsonl")})
    async with running("profiler", settings) as profiler:
        await submit(profiler, bundle, run_id, campaign)
        events = await wait_events(settings, {"profile.completed", "profile.failed"}, run_id=run_id)
    assert "nope.jsonl" in events["profile.failed"]["reason"]
    assert events["profile.failed"]["step"] == "profile"
