"""The Slurm serving plan (pure rendering): the exact sbatch argv, the job script
that fills a port and execs the argv without a shell, and what a scheduler
change does to the plan that gets approved."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contracts.campaign import Campaign, Matrix
from services.bench.errors import ServingError
from services.bench.executors import slurm, slurm_job
from services.bench.planning.builder import build_plan
from services.runtime.bundle.bundle_records import canonical_json
from services.runtime.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[4]
RUN = "toy-20261130-010101-abcdef"
RUN_DIR = f"/bundles/{RUN}"
FAKE = [sys.executable, "-m", "tests.support.fake_vllm", "--port", "{port}"]


def campaign(scheduler: str, selectors: dict[str, str] | None = None) -> Campaign:
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["traffic"] = {"shapes": ["short"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["capacity"].update(scheduler=scheduler, selectors=selectors or {})
    data["matrix"]["cells"] = [
        {"cell_id": "standing", "role": "standing"},
        {"cell_id": "ngram-k3", "role": "candidate", "regime": "cold",
         "serving": {"speculative": {"method": "ngram", "num_speculative_tokens": 3}}},
        {"cell_id": "operator", "role": "candidate",
         "serving": {"speculative": {"method": "ngram", "num_speculative_tokens": 2}},
         "vllm_sweep": {"serve_cmd": [*FAKE, "--host", "{host}", "--speculative-config", "{speculative_config_json}",
                                      "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]}},
    ]
    return Campaign.model_validate(data)


def plan_of(scheduler: str, selectors: dict[str, str] | None = None, **kwargs):
    camp = campaign(scheduler, selectors)
    assert isinstance(camp.matrix, Matrix)
    kwargs = {"run_dir": RUN_DIR, "cwd": "/srv/specdec", **kwargs}
    return build_plan(camp, camp.matrix, run_id=RUN, default_node="gpu-7", training_output=None,
                      prompts={"source": "shapes", "count": 4}, **kwargs)


def test_each_launch_shows_its_exact_labelled_batch_job() -> None:
    plan = plan_of("slurm", {"partition": "debug", "gres": "gpu:1"})
    assert plan.executor == "slurm"
    # warm standing, warm operator, then the cold cell once per trial.
    assert [(launch.cell_id, launch.trials) for launch in plan.launches] == [
        ("standing", [0, 1, 2]), ("operator", [0, 1, 2]), ("ngram-k3", [0]), ("ngram-k3", [1]), ("ngram-k3", [2])]
    job = plan.launches[3].slurm
    assert job is not None and plan.launches[3].kubernetes is None
    folder = f"{RUN_DIR}/bench/ngram-k3/launch-3"
    assert job.sbatch_argv == [
        "sbatch", "--parsable", "--job-name", f"specdec-{RUN}", "--comment", f"experiment={RUN}",
        "--nodelist", "gpu-7", "--nodes", "1", "--ntasks", "1", "--no-requeue", "--chdir", "/srv/specdec",
        "--output", f"{folder}/server.log", "--error", f"{folder}/server.log", "--partition", "debug",
        "--gres", "gpu:1", f"{folder}/serve-job.py", f"{folder}/endpoint.json",
    ]
    assert (job.job_script_path, job.log_path, job.endpoint_path) == (
        "bench/ngram-k3/launch-3/serve-job.py", "bench/ngram-k3/launch-3/server.log",
        "bench/ngram-k3/launch-3/endpoint.json")
    assert job.cancel_argv == ["scancel", "{job_id}"]
    # The script carries the cell's serve argv literally, and the label in its header.
    cell = next(c for c in plan.cells if c.cell_id == "ngram-k3")
    assert f"ARGV = {cell.serve_argv!r}\n" in job.job_script
    assert f"#SBATCH --comment=experiment={RUN}" in job.job_script
    assert any(f"scancel every job named specdec-{RUN} whose comment is experiment={RUN}" in c for c in plan.cleanup)


def test_servers_on_a_node_listen_beyond_loopback() -> None:
    local, on_slurm = plan_of("local"), plan_of("slurm")
    builtin_local = local.cells[0].serve_argv
    builtin_slurm = on_slurm.cells[0].serve_argv
    assert builtin_local[builtin_local.index("--host") + 1] == "127.0.0.1"
    assert builtin_slurm[builtin_slurm.index("--host") + 1] == "0.0.0.0"
    assert builtin_slurm[builtin_slurm.index("--port") + 1] == "{port}"
    operator = next(c for c in on_slurm.cells if c.cell_id == "operator").serve_argv
    assert operator[operator.index("--host") + 1] == "0.0.0.0"


def test_the_plan_that_gets_approved_changes_with_the_scheduler() -> None:
    def sha(plan) -> str:
        return hashlib.sha256(canonical_json(plan.model_dump(mode="json"))).hexdigest()

    local, on_slurm = plan_of("local"), plan_of("slurm")
    assert all(launch.slurm is None and launch.kubernetes is None for launch in local.launches)
    assert all(launch.slurm is not None for launch in on_slurm.launches)
    assert sha(local) != sha(on_slurm)
    assert sha(on_slurm) != sha(plan_of("slurm", {"partition": "gpu"}))
    assert sha(on_slurm) == sha(plan_of("slurm")), "the same inputs must give the same plan bytes"
    assert local.deployment_changes != on_slurm.deployment_changes


def test_a_scheduler_plan_needs_the_bundle_folder() -> None:
    with pytest.raises(ConfigurationError, match="bundle folder"):
        plan_of("slurm", run_dir=None)
    assert plan_of("local", run_dir=None, cwd=None).launches[0].slurm is None


HOSTILE = ["$(touch pwned)", "`touch pwned`", "a; touch pwned", "it's \"quoted\"", "{run_id}", "two\nlines",
           "ünï 😀", "*", "--", "\\x7bport\\x7d", "at-{port}-and-{port}"]


def test_the_job_script_fills_a_port_writes_the_endpoint_and_execs_every_token_verbatim(tmp_path: Path) -> None:
    shown = "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ['SPECDEC_EXPERIMENT']]))"
    script = tmp_path / "serve-job.py"
    script.write_text(slurm_job.job_script([sys.executable, "-c", shown, *HOSTILE], run_id=RUN), encoding="utf-8")
    endpoint = tmp_path / "endpoint.json"
    out = subprocess.run([sys.executable, str(script), str(endpoint)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    where = json.loads(endpoint.read_text())
    port = where["port"]
    assert isinstance(port, int) and port > 0 and where["host"]
    expected = [token.replace("{port}", str(port)) for token in HOSTILE]
    assert expected[-1] == f"at-{port}-and-{port}" and expected[4] == "{run_id}"
    assert json.loads(out.stdout) == [expected, RUN]
    assert where["argv"][3:] == expected
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "endpoint.json.tmp").exists()


def test_the_job_script_refuses_what_it_cannot_render() -> None:
    from services.runtime.bundle.bundle_paths import InvalidPath

    with pytest.raises(InvalidPath):
        slurm_job.job_script(["true"], run_id="toy-1; rm -rf ~")
    with pytest.raises(ServingError):
        slurm_job.job_script([], run_id=RUN)


def test_the_endpoint_file_is_read_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "endpoint.json"
    assert slurm.read_endpoint(path) is None
    path.write_text(json.dumps({"host": "gpu-7", "port": 41234, "argv": [], "job_id": "12"}))
    assert slurm.read_endpoint(path)["port"] == 41234  # type: ignore[index]  # just written
    path.write_text(json.dumps({"host": "gpu-7"}))
    with pytest.raises(ServingError, match="lacks host and port"):
        slurm.read_endpoint(path)


def test_an_unknown_or_malformed_slurm_selector_is_refused_before_approval() -> None:
    with pytest.raises(
        ConfigurationError, match=r"\['gpus'\] mean nothing to scheduler slurm; allowed: partition, nodelist, gres"
    ):
        plan_of("slurm", {"gpus": "1"})
    with pytest.raises(ConfigurationError, match="capacity.selectors.gres = 'gpu:' is not name"):
        plan_of("slurm", {"gres": "gpu:"})
