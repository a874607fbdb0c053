"""arctic-inference's vLLM plugin stays off in every server specdec starts: ARCTIC_INFERENCE_ENABLED is never
passed on (local launch, the Slurm job script, the Pod manifest), so every arm runs stock vLLM
(docs/bench-runner.md, "Suffix decoding"). Real processes for the local server and the job script."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import yaml

from services.bench.executors import slurm_job
from services.bench.executors.executor import launch
from tests.unit.bench.executors.test_kubernetes_plan import TEMPLATE, plan_of

SHOW = "import os, sys; print('plugin env:', os.environ.get('ARCTIC_INFERENCE_ENABLED'), flush=True)"


async def test_a_local_server_does_not_inherit_the_plugin_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCTIC_INFERENCE_ENABLED", "1")
    server = launch([sys.executable, "-c", SHOW, "{port}"], run_id="toy-arctic-run", log_path=tmp_path / "server.log")
    try:
        for _ in range(100):
            if "plugin env:" in (tmp_path / "server.log").read_text():
                break
            await asyncio.sleep(0.1)
    finally:
        server.stop(grace_s=1)
    assert "plugin env: None" in (tmp_path / "server.log").read_text()
    assert "ARCTIC_INFERENCE_ENABLED" not in server.env


def test_the_slurm_job_script_drops_the_plugin_switch(tmp_path):
    script = tmp_path / "serve-job.py"
    script.write_text(slurm_job.job_script([sys.executable, "-c", SHOW], run_id="toy-arctic-run"), encoding="utf-8")
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "endpoint.json")], cwd=tmp_path, text=True,
                         capture_output=True, timeout=30,
                         env={"ARCTIC_INFERENCE_ENABLED": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "plugin env: None"
    assert json.loads((tmp_path / "endpoint.json").read_text())["port"] > 0


def test_a_pod_template_cannot_switch_the_plugin_on(tmp_path):
    template = json.loads(json.dumps(TEMPLATE))
    template["spec"]["containers"][0].setdefault("env", []).append({"name": "ARCTIC_INFERENCE_ENABLED", "value": "1"})
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(template))
    manifest = plan_of(selectors={"namespace": "bench"}, template=path).launches[1].kubernetes.manifest
    container = manifest["spec"]["containers"][0]
    names = [e["name"] for e in container["env"]]
    assert "ARCTIC_INFERENCE_ENABLED" not in names and "HF_HOME" in names
