"""Sequential rounds end to end through real services (the bench-runner and the gate, a real Redis)
and stand-in servers (real processes, real HTTP): `continue` after round 1, an extra round, a decision.

The stand-ins pace their decode steps of one token (tests/support/fake_pacing.py): the standing cell
20 ms a step, the candidate 17.6 ms (a 12 % TPOT gain in the paced part; the stand-in's own time per
step, the same in both, makes the measured gain somewhat smaller). The candidate is a serving change
without speculation, so the campaign's floor is the agreement floor (gate.accuracy_floor) rather
than an acceptance floor no counter would read. Each window's pace multiplied by a seeded lognormal
factor (per-trial CV 4 %), as run-to-run noise does on real servers. With a cap of 8 trials per arm
and a minimum effect of 1 %, 3 trials per arm leave the repeated interval too wide to clear 1 % (the
first look spends little alpha); the seeds (34, 103) are draws whose round-1 interval is open and
whose interval clears the minimum effect at a later look by the cap in at least 97.7 % of simulated
timing jitters (3-5 % per trial on top, as a loaded 2-core machine adds; true gains 8-12 %). Nothing here
states a verdict: the shared rule reads the measured TPOTs."""

from __future__ import annotations

import orjson

from contracts import layout
from contracts.campaign import Campaign
from contracts.events import BenchRequested
from services.app.runs.rounds_status import rounds_cost
from services.bench.planning import rounds
from services.gate import decide, load_trials, split_by_role
from services.runtime.bundle.bundle import BundleStore
from tests.integration.test_bench_service import FAKE, bench_runner, campaign
from tests.support.services import running, wait_events

RUN = "toy-20261130-131313-abcdef"
CAP = 8


def paced(token_ms: float, seed: int) -> list[str]:
    return [*FAKE, "--fake-token-ms", str(token_ms), "--fake-trial-cv", "0.04", "--fake-seed", str(seed)]


def sequential_campaign() -> Campaign:
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    data["gate"].update(max_trials=CAP, min_effect_pct=1.0, guards=[], acceptance_floor=None, accuracy_floor=0.9)
    data["matrix"]["cells"] = [
        {"cell_id": "standing", "role": "standing", "vllm_sweep": {"serve_cmd": paced(20.0, 34)}},
        {"cell_id": "faster", "role": "candidate", "vllm_sweep": {"serve_cmd": paced(17.6, 103)}},
    ]
    for cell in data["matrix"]["cells"]:
        cell.update(concurrency=[1], regime="warm-interleaved", trials=3)
    return Campaign.model_validate(data)


async def test_continue_then_an_extra_round_then_a_decision(settings):
    bundle = BundleStore(settings.bundle_root)
    c = sequential_campaign()
    bundle.write_json(RUN, "campaign.json", c)
    async with bench_runner(settings) as bench, running("gate", settings):
        await bench.bus.publish(BenchRequested(run_id=RUN, producer="test", requested_by="test"))
        events = await wait_events(settings, {"bench.completed", "gate.decided"}, run_id=RUN, timeout_s=90)
    done, decided = events["bench.completed"], events["gate.decided"]
    assert done["failed_cells"] == {}

    # Round 1 (3 trials per arm): the level is open, the gate's rule on those trials says continue.
    first = bundle.read_json(RUN, rounds.look_path(3))
    assert first["stopped"] is None and first["levels"][0]["open"] and first["levels"][0]["verdict"] == "undecided"
    round1 = [t for t in load_trials([bundle.resolve(r["uri"]) for r in done["results"]]) if t.identity.trial < 3]
    base, cands = split_by_role(round1)
    d1 = decide(base, cands, c.gate, max_trials=CAP)
    assert d1.decision == "continue", d1.candidates[0].reasons

    # Extra rounds until a look decides it, below the cap.
    stops = [bundle.read_json(RUN, rounds.look_path(n))["stopped"] for n in range(3, CAP + 1)
             if (bundle.run_dir(RUN) / rounds.look_path(n)).exists()]
    used = 3 + len(stops) - 1
    assert stops[:-1] == [None] * (len(stops) - 1) and stops[-1] == "decided" and 3 < used <= CAP, stops
    last = bundle.read_json(RUN, rounds.look_path(used))["levels"][0]
    assert last["verdict"] == "better" and last["interval_pct"][1] < -1.0, last
    counts: dict[str, list[int]] = {}
    for ref in done["results"]:
        ident = orjson.loads(bundle.resolve(ref["uri"]).read_bytes())["identity"]
        counts.setdefault(ident["cell_id"], []).append(ident["trial"])
    assert {cell: sorted(t) for cell, t in counts.items()} == {"standing": list(range(used)),
                                                                "faster": list(range(used))}

    # Status states round 1 as the pilot: its spread and the trials per arm it implies, and where the rounds stopped.
    cost = rounds_cost(bundle, RUN)
    assert cost is not None and (cost.trials_per_arm, cost.stopped) == (used, "decided")
    assert cost.levels[0].source == "pilot" and cost.levels[0].cv_pct == first["levels"][0]["cv_pct"] > 0

    # The gate service decides on the same trials with the same cap: the decision the rounds stopped on.
    assert decided["decision"] == "promote" and decided["winner"] == "faster", decided["reasons"]
    level = orjson.loads(bundle.read_bytes(RUN, layout.DECISION))["candidates"][0]["levels"][0]
    assert (level["outcome"], level["stopped"], level["trials_used"]) == ("win", "decided", used)
