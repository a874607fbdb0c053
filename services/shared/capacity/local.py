"""Local observer: this machine as one node, read from /proc and `nvidia-smi`, read-only.

Workloads are labelled specdec processes, vLLM servers found by their command line and GPU compute
processes; CPU, load and memory are recorded, never decide (docs/capacity.md#how-a-node-is-judged).
Only the environments this user may read are seen.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from services.runtime.processes.procs import labelled_processes
from services.shared.capacity.model import NodeView, Workload
from services.shared.capacity.observe import Observation, file_capture, tail, to_capture
from services.shared.scheduler.runner import CommandRunner

# No selector keys: contracts.selectors.LOCAL is empty, so validation refuses any.

GPU_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu",
    "--format=csv,noheader,nounits",
]
APPS_QUERY = [
    "nvidia-smi",
    "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
    "--format=csv,noheader,nounits",
]
NVIDIA_SMI_TIMEOUT_S = 30.0
_CMDLINE_CHARS = 200


@dataclass(frozen=True)
class ProcessInfo:
    """One process seen on this machine."""

    pid: int
    argv: tuple[str, ...]
    experiment: str | None = None
    service: str | None = None


def parse_meminfo(text: str) -> tuple[float | None, float | None]:
    """(MemTotal, MemAvailable) in MiB from /proc/meminfo."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key.strip()] = int(parts[0]) / 1024  # kB -> MiB
    return values.get("MemTotal"), values.get("MemAvailable")


def parse_loadavg(text: str) -> float | None:
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        return None


def parse_gpus(text: str) -> int:
    """GPUs listed by GPU_QUERY (one CSV line each)."""
    return sum(1 for line in text.splitlines() if line.strip())


def parse_compute_apps(text: str) -> list[Workload]:
    """GPU compute processes listed by APPS_QUERY: pid, name, used MiB, GPU uuid."""
    apps = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 2 or not fields[0]:
            continue
        memory = f", {fields[2]} MiB" if len(fields) > 2 and fields[2] else ""
        gpu = fields[3] if len(fields) > 3 else "?"
        apps.append(
            Workload(kind="gpu_process", ref=fields[0], name=fields[1], state="running", detail=f"GPU {gpu}{memory}")
        )
    return apps


def is_vllm_server(argv: tuple[str, ...] | list[str]) -> bool:
    """True for a vLLM API server or engine core, however it was started."""
    if not argv:
        return False
    if argv[0].startswith("VLLM::"):  # engine-core processes rename themselves
        return True
    for i, arg in enumerate(argv):
        if arg.startswith("vllm.entrypoints"):
            return True
        if os.path.basename(arg) == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return True
    return False


def listening_port(argv: tuple[str, ...] | list[str]) -> str | None:
    """The port a server's command line asks for (`--port N` or `--port=N`), when it names one."""
    for i, arg in enumerate(argv):
        if arg == "--port" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--port="):
            return arg.split("=", 1)[1]
    return None


def workloads_of(processes: list[ProcessInfo], own_pid: int) -> list[Workload]:
    """Labelled processes and vLLM servers, each once, never this process itself."""
    found = []
    for proc in sorted(processes, key=lambda p: p.pid):
        if proc.pid == own_pid:
            continue
        if proc.experiment is None and not is_vllm_server(proc.argv):
            continue
        cmdline = " ".join(proc.argv)[:_CMDLINE_CHARS] or "?"
        detail = f"service {proc.service}" if proc.service else "vLLM server found by command line"
        port = listening_port(proc.argv)
        if port:
            detail += f", port {port}"
        found.append(
            Workload(
                kind="process",
                ref=str(proc.pid),
                name=cmdline,
                state="running",
                experiment=proc.experiment,
                detail=detail,
            )
        )
    return found


def scan_processes(proc_root: Path = Path("/proc")) -> list[ProcessInfo]:
    """Every process's argv, with the experiment label where it carries one."""
    labels = {p.pid: p for p in labelled_processes()}
    found = []
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        argv = tuple(part.decode("utf-8", errors="replace") for part in raw.split(b"\0") if part)
        label = labels.get(int(entry.name))
        found.append(
            ProcessInfo(
                pid=int(entry.name),
                argv=argv,
                experiment=label.run_id if label else None,
                service=label.service if label else None,
            )
        )
    return found


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        return f"(unreadable: {exc.strerror})"


def observe(selectors: Mapping[str, str], runner: CommandRunner) -> Observation:
    """This machine as one node. Reads only: no process is signalled or changed."""
    observation = Observation()
    meminfo, loadavg = _read("/proc/meminfo"), _read("/proc/loadavg")
    observation.captures += [
        file_capture("proc-meminfo", "/proc/meminfo", meminfo),
        file_capture("proc-loadavg", "/proc/loadavg", loadavg),
    ]
    processes = scan_processes()
    workloads = workloads_of(processes, os.getpid())
    # Only the matching processes are kept: other command lines may carry secrets
    # (passwords in argv) that have no place in an evidence bundle.
    matched = {int(w.ref) for w in workloads}
    listing = {
        "processes_scanned": len(processes),
        "matched": [
            {"pid": p.pid, "argv": list(p.argv), "experiment": p.experiment, "service": p.service}
            for p in processes
            if p.pid in matched
        ],
    }
    observation.captures.append(
        file_capture("processes", "/proc/*/cmdline and labelled environments", orjson.dumps(listing).decode())
    )
    gpus, blockers = None, []
    if shutil.which("nvidia-smi"):
        for name, argv in (("nvidia-smi-gpus", GPU_QUERY), ("nvidia-smi-apps", APPS_QUERY)):
            result = runner(argv, timeout_s=NVIDIA_SMI_TIMEOUT_S)
            observation.captures.append(to_capture(name, result))
            if not result.ok:
                status = "timed out" if result.timed_out else f"exited {result.exit_code}"
                blockers.append(
                    f"`{' '.join(argv)}` {status}: {tail(result.stderr.strip())}; the GPUs cannot be verified idle"
                )
            elif name == "nvidia-smi-gpus":
                gpus = parse_gpus(result.stdout)
            else:
                workloads += parse_compute_apps(result.stdout)
    total_mb, _available_mb = parse_meminfo(meminfo)
    observation.nodes = [
        NodeView(
            name=socket.gethostname(),
            state=None,
            cpus=float(len(os.sched_getaffinity(0))),
            memory_mb=round(total_mb, 1) if total_mb is not None else None,
            gpus=gpus,
            load_1m=parse_loadavg(loadavg),
            workloads=workloads,
            blockers=blockers,
        )
    ]
    return observation
