"""The local adapter: parsers of /proc and nvidia-smi output, and this machine's real processes."""

from __future__ import annotations

import os
import sys
import time

import orjson
import pytest

from contracts.campaign import CapacitySpec
from services.runtime.processes.procs import kill_group, spawn
from services.shared.capacity import local
from services.shared.capacity.check import check_node
from services.shared.capacity.errors import CapacityConfigError
from services.shared.scheduler.runner import SubprocessRunner

MEMINFO = (
    "MemTotal:       24683624 kB\nMemFree:         1234567 kB\nMemAvailable:   20480000 kB\nHugePages_Total:       0\n"
)


def test_meminfo_and_loadavg():
    assert local.parse_meminfo(MEMINFO) == (24683624 / 1024, 20480000 / 1024)
    assert local.parse_meminfo("") == (None, None)
    assert local.parse_loadavg("0.52 0.58 0.59 1/467 12345\n") == 0.52
    assert local.parse_loadavg("garbage") is None


def test_nvidia_smi_outputs():
    gpus = "0, GPU-8e1f, NVIDIA H200, 0, 143771, 0\n1, GPU-77aa, NVIDIA H200, 81234, 143771, 97\n"
    assert local.parse_gpus(gpus) == 2
    apps = local.parse_compute_apps("4242, /usr/bin/python3, 81000, GPU-77aa\n\n")
    assert len(apps) == 1
    assert (apps[0].kind, apps[0].ref, apps[0].name, apps[0].detail) == (
        "gpu_process",
        "4242",
        "/usr/bin/python3",
        "GPU GPU-77aa, 81000 MiB",
    )
    assert local.parse_compute_apps("") == []


@pytest.mark.parametrize(
    ("argv", "is_server"),
    [
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], True),
        (["/usr/local/bin/vllm", "serve", "m", "--port", "8000"], True),
        (["VLLM::EngineCore"], True),
        (["python", "-c", "import vllm"], False),
        (["grep", "vllm"], False),
        (["vllm", "bench", "serve"], False),
        ([], False),
    ],
)
def test_vllm_servers_are_found_by_command_line(argv, is_server):
    assert local.is_vllm_server(argv) is is_server


def test_workloads_are_labelled_processes_and_vllm_servers_never_ourselves():
    procs = [
        local.ProcessInfo(pid=10, argv=("bash",)),
        local.ProcessInfo(pid=11, argv=("python", "train.py"), experiment="run-a", service="trainer-proxy"),
        local.ProcessInfo(pid=12, argv=("vllm", "serve", "m")),
        local.ProcessInfo(
            pid=13, argv=("vllm", "serve", "m", "--port=8123"), experiment="run-b", service="bench-runner"
        ),
        local.ProcessInfo(pid=14, argv=("python", "-m", "vllm.entrypoints.openai.api_server", "--port", "8000")),
    ]
    found = local.workloads_of(procs, own_pid=12)
    assert [(w.ref, w.experiment) for w in found] == [("11", "run-a"), ("13", "run-b"), ("14", None)]
    assert [w.detail for w in found] == [
        "service trainer-proxy",
        "service bench-runner, port 8123",
        "vLLM server found by command line, port 8000",
    ]


def test_a_labelled_process_on_this_machine_makes_it_busy():
    child = spawn([sys.executable, "-c", "import time; time.sleep(30)"], run_id="other-run", service="trainer-proxy")
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and child.pid not in {p.pid for p in local.scan_processes() if p.experiment}:
            time.sleep(0.05)
        spec = CapacitySpec(scheduler="local", idle_check=["true"])
        verdict = check_node(spec, None, run_id="this-run", runner=SubprocessRunner())
        assert not verdict.idle
        assert any(f"process {child.pid}" in r and "experiment=other-run" in r for r in verdict.reasons), (
            verdict.reasons
        )
        assert verdict.verdicts[0].idle_check is None, "a busy node is not offered to the idle check"
        listing = orjson.loads(next(c.stdout for c in verdict.captures if c.name == "processes"))
        assert child.pid in {p["pid"] for p in listing["matched"]}
        # Only matching processes are recorded: other command lines may carry secrets.
        assert listing["processes_scanned"] > len(listing["matched"])
        assert os.getpid() not in {p["pid"] for p in listing["matched"]}
    finally:
        kill_group(os.getpgid(child.pid))
        child.wait()


def test_this_machine_is_read_as_one_node_with_raw_captures():
    spec = CapacitySpec(scheduler="local", idle_check=["true"])
    verdict = check_node(spec, None, run_id="this-run", runner=SubprocessRunner())
    node = verdict.nodes[0]
    assert len(verdict.nodes) == 1 and node.cpus == len(os.sched_getaffinity(0))
    assert node.memory_mb and node.memory_mb > 0 and node.load_1m is not None
    names = [c.name for c in verdict.captures]
    assert names[:3] == ["proc-meminfo", "proc-loadavg", "processes"] and "MemTotal" in verdict.captures[0].stdout


def test_local_takes_no_selectors():
    with pytest.raises(CapacityConfigError, match="allowed: none"):
        check_node(CapacitySpec(scheduler="local", selectors={"partition": "x"}, idle_check=["true"]), None,
                   run_id="r-1", runner=SubprocessRunner())
