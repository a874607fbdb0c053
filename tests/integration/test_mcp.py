"""`specdec mcp` over stdio, driven by the MCP SDK's own client, against a real Redis and every built
service, on the cheapest real campaign: the toy target, the standing cell and an ngram candidate served
by the stand-in server (tests/support/fake_vllm.py), no training.

The workflow an agent runs: evidence_init -> campaign_init -> campaign_run as a dry run (its plan
returned with its hash; no process started, no Slurm job, nothing outside the bundle changed) ->
plan_show and the plan as a resource -> campaign_run live naming the hash -> campaign_status until the
report is published -> publish_to_lake as a dry run (nothing in the lake) -> live to a moto S3 server
on loopback, every object's bytes checked against the hashes the publication names.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ContentBlock, TextContent, TextResourceContents

from services.runtime.settings import RuntimeSettings
from tests.support.campaigns import (
    ROOT,
    Topology,
    drop_keys,
    leftovers,
    write_campaign,
    write_trainer,
)
from tests.support.waiting import wait_for

TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
MODELS = ROOT / ".run" / "examples"  # the e2e tests' toy target, reused by content hash
SERVER_ARGV = ["-m", "services.cli.main", "mcp"]  # `specdec mcp`
TOOLS = {"evidence_init", "campaign_init", "campaign_validate", "campaign_run", "campaign_status", "plan_show",
         "approve", "gate", "report_render", "publish_to_lake", "perf_tune_report_campaign_init",
         "perf_tune_report_campaign_run", "perf_tune_report_publish_to_lake"}
BUCKET = "specdec-lake"
RUN_TIMEOUT_S = 150
IDLE_MARK = "idle-check-ran"


@pytest.fixture(scope="module")
def toy_target() -> Path:
    sys.path.insert(0, str(ROOT / "infra/examples"))
    import toy_target as builder  # the example builder is a script, not a package

    return Path(builder.build_target(TRAFFIC, MODELS / "toy-target", seed=0, log=lambda *_: None))


@pytest.fixture(scope="module")
def slurm_env() -> dict[str, str]:
    done = subprocess.run([str(ROOT / "infra/bin/ensure-slurm")], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"infra/bin/ensure-slurm exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A moto S3 server on loopback with one bucket; the AWS settings every boto3 client reads."""
    port = _free_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}"}
    with (tmp_path / "moto.log").open("wb") as log:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"], region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")

        def up() -> bool:
            try:
                client.create_bucket(Bucket=BUCKET)
            except Exception:  # noqa: BLE001 - not listening yet
                return False
            return True

        wait_for(up, 30, "the moto server", poll_s=0.2)
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _objects(env: dict[str, str]) -> dict[str, bytes]:
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"], region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {item["Key"]: client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read() for item in listed}


def _snapshot(roots: list[Path], skip: list[Path]) -> dict[str, tuple[int, int]]:
    """Every file and folder under `roots` but those under `skip`: (size, mtime_ns)."""
    found = {}
    for root in roots:
        for path in [root, *root.rglob("*")]:
            if any(path == s or s in path.parents for s in skip):
                continue
            info = path.stat()
            found[str(path)] = (info.st_size if path.is_file() else 0, info.st_mtime_ns)
    return found


def _slurm_jobs(slurm_env: dict[str, str], run_id: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%j|%k"], capture_output=True, text=True, check=True,
                         env={**os.environ, **slurm_env}).stdout
    return [line for line in out.splitlines() if run_id in line]


def _reading(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The server's environment, reading campaign and traffic files where this test writes them and in the
    repository (SPECDEC_MCP_ROOTS)."""
    return {**env, "SPECDEC_MCP_ROOTS": f"{tmp_path}{os.pathsep}{ROOT}"}


def _campaign(tmp_path: Path, target: Path) -> Path:
    """The cheapest real campaign, without the pre-approval policy the toy campaign carries: every plan waits.
    Without the acknowledgement, too: its idle check (which leaves IDLE_MARK behind) may run only before a launch
    of an approved plan, never in the dry run."""
    path = write_campaign(tmp_path / "campaign" / "campaign.yaml", target=target, traffic=TRAFFIC,
                          trainer=write_trainer(tmp_path / "trainer"), train_draft=False)
    data = yaml.safe_load(path.read_text())
    data.pop("review", None)
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = False
    program = tmp_path / "campaign" / "idle-check"
    program.write_text(f"#!/bin/sh\ntouch {tmp_path / IDLE_MARK}\nexit 0\n")
    program.chmod(0o755)
    data["capacity"]["idle_check"] = [str(program), "{node}"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _text(content: ContentBlock) -> str:
    assert isinstance(content, TextContent), content  # the server answers in text
    return content.text


async def _call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, f"{name}: {_text(result.content[0]) if result.content else result}"
    return result.structured_content


async def _refused(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} was not refused: {result.structured_content}"
    return _text(result.content[0])


def test_mcp_drives_a_campaign_from_evidence_to_the_lake(
    settings: RuntimeSettings, settings_env: dict[str, str], toy_target: Path, slurm_env: dict[str, str],
    *, lake: dict[str, str], tmp_path: Path,
) -> None:
    started = time.monotonic()
    topology = Topology(redis_url=settings.redis_url, prefix=settings.stream_prefix, root=tmp_path)
    assert topology.bundle_root == settings.bundle_root  # the services and the MCP server share one bundle root
    topology.start_all()
    try:
        asyncio.run(_workflow(settings, {**settings_env, **lake}, toy_target, slurm_env,
                              lake=lake, tmp_path=tmp_path, topology=topology))
    finally:
        topology.stop()
        drop_keys(settings.redis_url, settings.stream_prefix)
    elapsed = time.monotonic() - started
    print(f"mcp workflow: {elapsed:.1f} s")


async def _workflow(settings: RuntimeSettings, env: dict[str, str], toy_target: Path, slurm_env: dict[str, str],
                    *, lake: dict[str, str], tmp_path: Path, topology: Topology) -> None:
    campaign = _campaign(tmp_path, toy_target)
    run_id = f"mcp-{uuid.uuid4().hex[:10]}"
    (tmp_path / "logs").mkdir(exist_ok=True)
    params = StdioServerParameters(command=sys.executable, args=SERVER_ARGV, env=_reading(env, tmp_path),
                                   cwd=str(ROOT))
    with (tmp_path / "logs" / "mcp-server.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS

            created = await _call(client, "evidence_init", family="toy-llama", experiment_id=run_id)
            assert created["run_id"] == run_id
            bundle = Path(created["bundle_path"])
            assert bundle == settings.bundle_root / run_id and bundle.is_dir() and not any(bundle.iterdir())
            assert "in use" in await _refused(client, "evidence_init", family="toy-llama", experiment_id=run_id)

            stored = await _call(client, "campaign_init", config=str(campaign), experiment_id=run_id,
                                 family="toy-llama", evidence_bundle=str(bundle))
            kept = {ref["uri"].split("/", 3)[3] for ref in stored["artifacts"]}
            assert {"campaign.json", "campaign.yaml"} <= kept and stored["pre_approved_steps"] == []
            assert "not published yet" in await _refused(client, "campaign_run", run_id=run_id,
                                                         i_understand_this_mutates_cluster=True)
            assert topology.events(run_id) == [], "a refused call published something"

            # The dry run: the steps that change nothing run, the bench plan is produced and waits.
            outside = _snapshot([tmp_path, toy_target], skip=[settings.bundle_root, tmp_path / "logs"])
            dry = await _call(client, "campaign_run", run_id=run_id)
            assert dry["dry_run"] and dry["published_submission"] and dry["approved_sha256s"] == []
            assert [(p["step"], p["approved"]) for p in dry["plans"]] == [("bench", False)], dry["plans"]
            plan = dry["plans"][0]
            assert plan["document"]["run_id"] == run_id
            states = {s["step"]: s["state"] for s in dry["status"]["steps"]}
            assert states["bench"] == "awaiting_approval" and states["training"] == "skipped", states
            events = topology.settle(run_id, quiet_s=3.0)
            ran = [e["schema"] for e in events
                   if e["schema"].startswith(("bench.trial", "bench.completed", "training.started", "run.approved"))]
            assert ran == [], f"the dry run executed something: {ran}"
            assert leftovers(run_id) == [], "a process labelled with the run was started"
            assert _slurm_jobs(slurm_env, run_id) == []
            assert _snapshot([tmp_path, toy_target], skip=[settings.bundle_root, tmp_path / "logs"]) == outside
            # The capacity step selected from the scheduler's reads alone: the campaign's idle check did not run.
            assert not (tmp_path / IDLE_MARK).exists(), "the dry run ran the campaign's idle check"
            selected = next(e for e in events if e["schema"] == "capacity.selected")
            assert "not acknowledged" in (selected["idle_check_skipped"] or ""), selected

            shown = await _call(client, "plan_show", run_id=run_id, step="bench")
            assert shown["sha256"] == plan["sha256"] and "approval: none yet" in shown["text"]
            read = await client.read_resource(plan["uri"])
            assert isinstance(read.contents[0], TextResourceContents), read.contents
            assert hashlib.sha256(read.contents[0].text.encode()).hexdigest() == plan["sha256"]
            again = await _call(client, "campaign_run", run_id=run_id, wait_for_plans_s=0)
            assert not again["published_submission"], "a second dry run published the campaign again"

            # Live: approve the plan by its hash; the services run it, then gate, report and publish (a dry run).
            live = await _call(client, "campaign_run", run_id=run_id, i_understand_this_mutates_cluster=True,
                               plan_sha256s=[plan["sha256"]])
            assert live["approved_sha256s"] == [plan["sha256"]] and live["approval_event_id"]
            status = await _until_published(client, run_id)
            assert not status["halted"], status
            states = {s["step"]: s["state"] for s in status["steps"]}
            assert states["gate"] == "done" and states["report"] == "done", states
            # The bench-runner's re-check before its first launch ran the idle check: after the approval.
            assert (tmp_path / IDLE_MARK).exists(), "the approved run's pre-launch re-check ran no idle check"

            # The lake: a dry run sends nothing; live sends every file, bytes as hashed.
            target = f"s3://{BUCKET}/reports"
            dry_pub = await _call(client, "publish_to_lake", run_id=run_id, target=target)
            assert dry_pub["dry_run"] and dry_pub["files"]
            assert _objects(lake) == {}, "a dry run wrote to the lake"
            pub = await _call(client, "publish_to_lake", run_id=run_id, target=target,
                              i_understand_this_publishes_externally=True)
            assert not pub["dry_run"] and pub["external"] and pub["acknowledged_by"] == "mcp"
            # Keys PREFIX/<run_id>/<name> (services/publisher/publish/publish.py); every byte as the publication
            # hashed it.
            objects = {key: hashlib.sha256(data).hexdigest() for key, data in _objects(lake).items()}
            sent = {f"reports/{run_id}/{item['name']}": item["ref"]["sha256"]
                    for item in [*pub["files"], *pub["evidence"]]}
            assert len(sent) == len(pub["files"]) + len(pub["evidence"]) and pub["files"] and pub["evidence"], pub
            assert objects == {**sent, f"reports/{run_id}/manifest.json": pub["manifest_sha256"]}


async def _until_published(client: Client, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = await _call(client, "campaign_status", run_id=run_id)
        states = {s["step"]: s["state"] for s in status["steps"]}
        if status["halted"] or states["publish"] == "done":
            return status
        await asyncio.sleep(1.0)
    raise AssertionError(f"run {run_id} did not publish its report within {RUN_TIMEOUT_S} s: {status}")


# --- the workflow document, verbatim: its tool names, its `args` call shape, a canonical matrix file ------------

WORKFLOW_TOOLS = {"perf_tune_report_campaign_init", "perf_tune_report_campaign_run", "perf_tune_report_publish_to_lake"}


def _canonical(tmp_path: Path, target: Path) -> Path:
    """The cheapest real canonical matrix: the standing cell and an ngram candidate on the stand-in server (its
    command is a wrapper, so each cell declares its serving config in specdec's keys), named shapes (no training)."""
    from tests.support.campaigns import fake_serve

    data = yaml.safe_load((ROOT / "infra/examples/canonical-campaign.yaml").read_text())
    data["target"]["checkpoint"] = str(target)
    data["load"] = {"num_prompts": 4, "warmup_requests": 1, "max_output_tokens": 12}
    data["publish"] = {"target": f"file://{tmp_path / 'service-lake'}"}
    for cell in data["cells"]:
        spec = {"method": "ngram", "num_speculative_tokens": 3} if cell["cell_id"] != "standing" else None
        cell["concurrencies"] = [1]
        cell["serving"] = {"graph_mode": "eager", "speculative": spec}
        cell["vllm_sweep"] = {"serve_cmd": fake_serve(spec is not None)}
        cell.pop("tensor_parallel", None)
        cell.pop("quant", None)
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_an_agent_follows_the_workflow_document_verbatim(
    settings: RuntimeSettings, settings_env: dict[str, str], toy_target: Path, tmp_path: Path,
) -> None:
    started = time.monotonic()
    topology = Topology(redis_url=settings.redis_url, prefix=settings.stream_prefix, root=tmp_path)
    topology.start_all()
    try:
        asyncio.run(_document(settings, settings_env, toy_target, tmp_path, topology=topology))
    finally:
        topology.stop()
        drop_keys(settings.redis_url, settings.stream_prefix)
    print(f"workflow document: {time.monotonic() - started:.1f} s")


async def _document(settings: RuntimeSettings, env: dict[str, str], target: Path, tmp_path: Path,
                    *, topology: Topology) -> None:
    matrix = _canonical(tmp_path, target)
    run_id = f"doc-{uuid.uuid4().hex[:10]}"
    (tmp_path / "logs").mkdir(exist_ok=True)
    params = StdioServerParameters(command=sys.executable, args=SERVER_ARGV, env=_reading(env, tmp_path),
                                   cwd=str(ROOT))
    with (tmp_path / "logs" / "mcp-server.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
            assert WORKFLOW_TOOLS <= {tool.name for tool in (await client.list_tools()).tools}
            help_text = (await _call(client, "perf_tune_report_campaign_run", args=["--help"]))["help"]
            assert "--dry-run" in help_text and "--campaign" in help_text

            # 1. Create one identity.
            made = await _call(client, "evidence_init", args=["--family", "toy-llama", "--intent",
                                                               "does ngram pay on the toy target", "--run-id", run_id])
            bundle = made["bundle_path"]
            assert made["run_id"] == run_id and "perf_tune_report_campaign_init" in made["next_step"]
            # 2. Initialise the campaign with the required config.
            init = await _call(client, "perf_tune_report_campaign_init", args=[
                "--config", str(matrix), "--experiment-id", run_id, "--family", "toy-llama",
                "--evidence-bundle", bundle])
            assert init["run_id"] == run_id and init["bundle"] == bundle and "--dry-run" in init["next_step"]
            # An acknowledgement inside raw args is refused; nothing ran.
            refused = await _refused(client, "perf_tune_report_campaign_run", args=[
                "--config", str(matrix), "--campaign", run_id, "--i-understand-this-mutates-cluster"])
            assert "acknowledgement" in refused
            assert leftovers(run_id) == [] and topology.events(run_id) == []
            # 3. Dry run: plans returned with their hashes, nothing executed, no server started.
            dry = await _call(client, "perf_tune_report_campaign_run",
                              args=["--config", str(matrix), "--campaign", bundle, "--dry-run"])
            assert dry["dry_run"] and [p["step"] for p in dry["plans"]] == ["bench"], dry
            plan = dry["plans"][0]
            assert {"launches", "deployment_changes", "warmup", "cleanup", "load"} <= set(plan["document"])
            topology.settle(run_id, quiet_s=2.0)
            assert leftovers(run_id) == [], "a server started before the live call"
            # 4. Live, with the structured field: exactly the plan the dry run returned.
            live = await _call(client, "perf_tune_report_campaign_run",
                               args=["--config", str(matrix), "--campaign", run_id],
                               i_understand_this_mutates_cluster=True)
            assert live["approved_sha256s"] == [plan["sha256"]] and not live["dry_run"]
            # 5. The decision.
            status = await _until_published(client, run_id)
            assert not status["halted"], status
            assert (Path(bundle) / "gate/DECISION.json").is_file()
            # 6. Publish: a dry run first, then live to a file:// lake with the typed field for that call.
            lake = tmp_path / "lake"
            dry_pub = await _call(client, "perf_tune_report_publish_to_lake",
                                  args=["--campaign", run_id, "--target", f"file://{lake}", "--dry-run"])
            assert dry_pub["dry_run"] and not lake.exists()
            pub = await _call(client, "perf_tune_report_publish_to_lake", args=["--campaign", run_id, "--target",
                                                                               f"file://{lake}"],
                              i_understand_this_publishes_externally=True)
            assert not pub["dry_run"] and (lake / run_id).is_dir(), pub
    # The intent is evidence: in the bundle, and in the report.
    assert "does ngram pay" in (Path(bundle) / "intent.json").read_text()
    assert "does ngram pay on the toy target" in (Path(bundle) / "report/report.md").read_text()
