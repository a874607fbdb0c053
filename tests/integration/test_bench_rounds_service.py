"""Sequential rounds through the bench-runner service, a real Redis and stand-in servers (real
processes, real HTTP): gate.max_trials in the approved plan; the rounds stop at the first look
when every level is decided (the stand-in serving speculation streams 3 tokens a chunk: a TPOT
about 3x lower), and run to the cap when a level stays open (the standing config against itself:
an A/A comparison whose interval cannot settle within +-1 % in 3 or 4 trials)."""

from __future__ import annotations

import orjson

from contracts.campaign import Campaign
from contracts.events import BenchRequested
from services.bench.planning import rounds
from services.runtime.bundle.bundle import BundleStore
from tests.integration.test_bench_service import FAKE, bench_runner, campaign
from tests.support.services import wait_events


def rounds_campaign(candidate: dict, *, cap: int) -> Campaign:
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    data["gate"]["max_trials"] = cap
    data["matrix"]["cells"] = [data["matrix"]["cells"][0], candidate]
    for cell in data["matrix"]["cells"]:
        cell.update(concurrency=[1], regime="warm-interleaved", trials=3)
    return Campaign.model_validate(data)


async def run(settings, run_id: str, c: Campaign) -> tuple[dict, BundleStore]:
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", c)
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=120))["bench.completed"]
    return done, bundle


def trial_counts(bundle: BundleStore, run_id: str, done: dict) -> dict[str, list[int]]:
    counts: dict[str, list[int]] = {}
    for ref in done["results"]:
        ident = orjson.loads(bundle.resolve(ref["uri"]).read_bytes())["identity"]
        counts.setdefault(ident["cell_id"], []).append(ident["trial"])
    return {cell: sorted(trials) for cell, trials in counts.items()}


async def test_rounds_stop_when_decided_and_run_to_the_cap_when_not(settings):
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    faster = {"cell_id": "ngram-k3", "role": "candidate", "serving": {"speculative": spec},
              "vllm_sweep": {"serve_cmd": [*FAKE, "--speculative-config", "{speculative_config_json}"]}}
    decided_run = "toy-20261130-111111-abcdef"
    done, bundle = await run(settings, decided_run, rounds_campaign(faster, cap=5))
    plan = bundle.read_json(decided_run, "bench/plan.json")
    assert plan["rounds"]["max_trials"] == 5 and len(plan["blocks"]) == 5, "the approved plan names the ceiling"
    assert done["failed_cells"] == {}
    assert trial_counts(bundle, decided_run, done) == {"standing": [0, 1, 2], "ngram-k3": [0, 1, 2]}
    look = bundle.read_json(decided_run, rounds.look_path(3))
    assert look["stopped"] == "decided" and look["levels"][0]["verdict"] == "better", look

    same = {"cell_id": "again", "role": "candidate", "vllm_sweep": {"serve_cmd": [*FAKE]}}
    open_run = "toy-20261130-121212-abcdef"
    done, bundle = await run(settings, open_run, rounds_campaign(same, cap=4))
    assert done["failed_cells"] == {}
    assert trial_counts(bundle, open_run, done) == {"standing": [0, 1, 2, 3], "again": [0, 1, 2, 3]}
    looks = [bundle.read_json(open_run, rounds.look_path(n)) for n in (3, 4)]
    assert [look["stopped"] for look in looks] == [None, "cap"], looks
    # The earlier run of the same target and hardware gave this plan its noise.
    noise = bundle.read_json(open_run, "bench/plan.json")["rounds"]["noise"][0]
    assert noise["runs"] == [decided_run] and noise["trials"] == 6 and noise["cv_pct"] is not None
