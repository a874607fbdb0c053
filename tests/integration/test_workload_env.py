"""Workloads start with a declared environment: a trainer (the trainer-proxy's local execution), a server
(the bench executor's launch) and the idle check each dump the environment they were given to a file, and
none of specdec's own credentials is in it, while the variable the campaign declared is. Real processes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from contracts.campaign import CapacitySpec
from services.bench.executors.executor import LocalExecutor
from services.bench.planning.model import CellPlan
from services.runtime.bundle.bundle import BundleStore
from services.shared.capacity import check
from services.shared.capacity.check import check_node
from services.shared.capacity.model import NodeView
from services.shared.capacity.observe import Observation
from services.shared.scheduler.runner import SubprocessRunner
from services.trainer_proxy.execution.local import run_local
from services.trainer_proxy.planning.model import LocalLaunch

# Writes its whole environment as JSON to argv[1], then stays up a while (a server is stopped by the test).
DUMP = ("import json, os, sys, time; open(sys.argv[1] + '.tmp', 'w').write(json.dumps(dict(os.environ))); "
        "os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(float(sys.argv[2]))")
SECRETS = {
    "SPECDEC_REDIS_URL": "redis://specdec:redis-password-123@127.0.0.1:6379/0",
    "SPECDEC_PUBLISH_TOKEN_ENV": "LAKE_TOKEN",
    "LAKE_TOKEN": "lake-token-value-456",
    "SPECDEC_MCP_TOKEN_ENV": "MCP_TOKEN",
    "MCP_TOKEN": "mcp-token-value-789",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
}
DECLARED = {"HF_TOKEN": "hf_declared_value_000"}


@pytest.fixture
def service_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, **DECLARED}.items():
        monkeypatch.setenv(name, value)


def _dumped(path: Path) -> dict[str, str]:
    for _ in range(200):
        if path.exists():
            return json.loads(path.read_text())
        import time
        time.sleep(0.05)
    raise AssertionError(f"the workload wrote no environment to {path}")


def _no_credentials(env: dict[str, str]) -> None:
    leaked = sorted(name for name in SECRETS if name in env)
    assert not leaked, f"specdec's credentials reached the workload: {leaked}"
    text = json.dumps(env)
    assert not [value for value in SECRETS.values() if value in text]
    assert env["PATH"]  # what the platform needs still passes


async def test_a_trainer_gets_its_declared_variables_and_no_credentials(tmp_path: Path, service_env: None) -> None:
    out = tmp_path / "env.json"
    launch = LocalLaunch(argv=[sys.executable, "-c", DUMP, str(out), "0"], cwd=str(tmp_path), env_added={},
                         stdout_path="stdout.log", stderr_path="stderr.log", env=["HF_TOKEN"])

    async def started(_: str) -> None:
        return None

    outcome = await run_local(launch, run_id="toy-env-train", run_dir=tmp_path, timeout_s=30, kill_grace_s=1,
                              on_started=started)
    assert outcome.exit_code == 0, (tmp_path / "stderr.log").read_text()
    env = _dumped(out)
    _no_credentials(env)
    assert env["HF_TOKEN"] == DECLARED["HF_TOKEN"]
    assert env["SPECDEC_EXPERIMENT"] == "toy-env-train"


async def test_a_server_gets_its_cells_declared_variables_and_no_credentials(tmp_path: Path, service_env: None) -> None:
    out = tmp_path / "env.json"
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    cell = CellPlan.model_construct(cell_id="c0", serve_argv=[sys.executable, "-c", DUMP, str(out), "30", "{port}"],
                                    env=["HF_TOKEN"])  # type: ignore[call-arg]  # a partial plan: the fields start reads
    served = await LocalExecutor("toy-env-serve", bundle).start(
        0, None, cell, "bench/c0/launch-0")  # type: ignore[arg-type]  # no Launch: the local executor reads the cell
    try:
        env = await asyncio.to_thread(_dumped, out)
    finally:
        await served.stop()
    _no_credentials(env)
    assert env["HF_TOKEN"] == DECLARED["HF_TOKEN"]
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"  # what the executor sets itself still passes


def test_the_idle_check_gets_no_credentials_and_a_missing_declared_name_is_named(
    tmp_path: Path, service_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This machine as an empty node: the idle check runs only on a node no workload holds, and a shared test
    # machine may hold some (the observation is not what is tested here; the idle check's process is real).
    monkeypatch.setitem(check.ADAPTERS, "local",
                        lambda selectors, runner: Observation(nodes=[NodeView(name="here", state=None)]))
    out = tmp_path / "env.json"
    spec = CapacitySpec(scheduler="local", idle_check=[sys.executable, "-c", DUMP, str(out), "0"])
    assert check_node(spec, None, run_id="toy-env-idle", runner=SubprocessRunner()).idle
    env = _dumped(out)
    _no_credentials(env)
    assert "HF_TOKEN" not in env  # not declared for the idle check
    monkeypatch.delenv("HF_TOKEN")
    declared = CapacitySpec(scheduler="local", idle_check=[sys.executable, "-c", "pass"], idle_check_env=["HF_TOKEN"])
    with pytest.raises(Exception, match=r"HF_TOKEN.*not set"):
        check_node(declared, None, run_id="toy-env-idle", runner=SubprocessRunner())
