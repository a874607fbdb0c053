"""Lookup sizes at run time: a serve wrapper that keeps the method but rewrites prompt_lookup_max 4 -> 2 and
prompt_lookup_min 2 -> 1 fails its cell before the first trial, naming the fields; the engine's config line
states neither, the API server's 'non-default args' line (what it received after the wrapper) does. The
wrapper that drops --speculative-config altogether is still caught (tests/integration/test_bench_service.py)."""

from __future__ import annotations

import sys

from contracts.campaign import Campaign
from contracts.events import BenchRequested
from services.runtime.bundle.bundle import BundleStore
from tests.integration.test_bench_service import FAKE, bench_runner, campaign
from tests.support.services import wait_events

# The operator's wrapper: it passes --speculative-config on with smaller lookup sizes, then execs the server.
REWRITE = (
    "import json, os, sys; a = sys.argv[1:]; i = a.index('--speculative-config') + 1; s = json.loads(a[i]); "
    "s['prompt_lookup_max'] = 2; s['prompt_lookup_min'] = 1; a[i] = json.dumps(s); "
    "os.execv(sys.executable, [sys.executable, '-m', 'tests.support.fake_vllm', *a])"
)


async def test_a_wrapper_that_rewrites_the_lookup_sizes_fails_its_cell_naming_them(settings):
    run_id = "toy-20261202-090909-abcdef"
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    data["matrix"]["cells"] = [
        data["matrix"]["cells"][0],
        {"cell_id": "ngram-k3", "role": "candidate", "concurrency": [1], "serving": {"speculative": spec},
         "vllm_sweep": {"serve_cmd": [*FAKE, "--speculative-config", "{speculative_config_json}"]}},
        {"cell_id": "rewritten", "role": "candidate", "concurrency": [1], "serving": {"speculative": spec},
         "vllm_sweep": {"serve_cmd": [sys.executable, "-c", REWRITE, *FAKE[3:], "--speculative-config",
                                      "{speculative_config_json}"]}},
    ]
    # One trial per cell shows the path (an exploratory matrix allows it); the read-back runs before any trial.
    data["matrix"]["exploratory"] = True
    data["gate"]["min_trials"] = 2
    for cell in data["matrix"]["cells"]:
        cell["trials"], cell["concurrency"] = 1, [1]
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", Campaign.model_validate(data))
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=120))["bench.completed"]
    reason = done["failed_cells"]["rewritten"]
    assert "prompt_lookup_max: declared 4, effective 2" in reason
    assert "prompt_lookup_min: declared 2, effective 1" in reason
    assert "ngram-k3" not in done["failed_cells"]
    assert not list(bundle.run_dir(run_id).glob("bench/rewritten/trial-*")), "a trial ran on the rewritten config"
