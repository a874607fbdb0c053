"""The trainer's keeper: a small process that owns a local trainer, so the trainer outlives its service.

Standard library only (`python -I keeper.py SPEC_JSON`): it must run however the service's imports are
set up. The trainer dies with its keeper, so it never runs without something that records its end;
the keeper writes `training/keeper.json` and `training/exit.json`, each whole (temporary file, then
rename), and prints the trainer's pid as one JSON line.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

_PR_SET_PDEATHSIG = 1
POLL_S = 0.05


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22); None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def write_whole(path: str, record: dict[str, object]) -> None:
    """Readers see no file or the whole record, never a part (and never a torn one after a crash)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(record, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _die_with_keeper() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _end_group(pgid: int, grace_s: float) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(POLL_S)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return


def main(spec: dict[str, Any]) -> int:  # the proxy's spec, as json.loads read it
    argv = [str(a) for a in spec["argv"]]
    grace_s = float(spec["grace_s"])
    stop: dict[str, float] = {}
    # Until the trainer runs, SIGTERM only notes the stop: the trainer is ended as soon as it exists.
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.setdefault("at", time.monotonic()))
    try:
        with open(str(spec["stdout"]), "wb") as out, open(str(spec["stderr"]), "wb") as err:
            trainer = subprocess.Popen(  # an argv list, never a shell
                argv, cwd=str(spec["cwd"]), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                process_group=0, preexec_fn=_die_with_keeper,
            )
    except OSError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    started_at = time.time()
    write_whole(str(spec["record"]), {
        "keeper_pid": os.getpid(), "keeper_start": start_ticks(os.getpid()),
        "trainer_pid": trainer.pid, "trainer_start": start_ticks(trainer.pid), "started_at": started_at,
    })
    try:
        print(json.dumps({"pid": trainer.pid}), flush=True)
        sys.stdout.close()
    except OSError:
        pass  # the service died before reading it: the record above is what a restarted one reads
    termed = killed = False
    while trainer.poll() is None:
        if "at" in stop and not termed:
            termed = True
            try:
                os.killpg(trainer.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass  # the trainer ended meanwhile; poll() reaps it
        if termed and not killed and time.monotonic() - stop["at"] > grace_s:
            killed = True
            try:
                os.killpg(trainer.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(POLL_S)
    ended_at = time.time()
    code = trainer.returncode
    # The main process ended: so does everything it started (the group outlives its leader).
    _end_group(trainer.pid, grace_s)
    write_whole(str(spec["exit"]), {
        "exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None,
        # Stopped: told to stop while the trainer ran (a stop that came after its end changes nothing).
        "started_at": started_at, "ended_at": ended_at, "stopped": termed,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
