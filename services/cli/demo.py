"""`specdec demo` (what `make demo` runs): the embedded default campaign, end to end (docs/demo.md).

It fetches or reuses the real target (SmolLM2-135M-Instruct) and the environment of its example EAGLE-3
trainer, starts every built service as a local process, submits infra/examples/demo-campaign.yaml
(pre-approved for this machine's local executor), follows the run live and ends with the outcome. A
failing step exits non-zero with its reason, and steps that did not run are named with why: it never
reports success for work that did not run.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from contracts import layout
from contracts.catalogue import STEP_OWNER
from contracts.streams import PROGRESS_SCHEMA
from services.app.campaign.submit import submit
from services.app.campaign.validate import validate
from services.app.context import connect
from services.app.runs.ops import progress_of
from services.app.runs.progress import RunStatus, event_detail, one_line, run_status
from services.app.runs.streams import follow
from services.cli.progress_view import ProgressView, progress_view
from services.cli.up import start, stop, stop_grace_s
from services.runtime import apps
from services.runtime.errors import ConfigurationError, SpecdecError
from services.runtime.processes.procs import deployment_id, end_labelled
from services.runtime.settings import RuntimeSettings
from services.shared.formatting import concurrency, ms, number

ROOT = Path(__file__).resolve().parents[2]
DEMO_CAMPAIGN = ROOT / "infra/examples/demo-campaign.yaml"
TERMINAL_OK = "publish"


# The embedded models a campaign may name, by checkpoint folder, and the script that builds
# (or reuses, by content hash) each: the real default and the toy target make test uses.
BUILDERS: dict[str, list[str]] = {
    "models/smollm2-135m-instruct": ["infra/examples/smollm2.py", "--out", "models/smollm2-135m-instruct",
                                     "--cache", ".cache/wheels", "--dtype", "float32"],
    "models/toy-target": ["infra/examples/toy_target.py", "--traffic", "infra/examples/sample-traffic.jsonl",
                          "--out", "models/toy-target"],
}


def ensure_target(campaign: Path, out: TextIO) -> None:
    """Build (or reuse) the embedded model the campaign serves; an operator's own model is left alone."""
    import yaml

    checkpoint = str((yaml.safe_load(campaign.read_text()) or {}).get("target", {}).get("checkpoint", ""))
    argv = BUILDERS.get(checkpoint.rstrip("/"))
    if argv is None:
        out.write(f"target {checkpoint}: not an embedded model, used as it is\n")
        return
    started = time.monotonic()
    subprocess.run([sys.executable, *argv], check=True, cwd=ROOT)  # fixed argv
    out.write(f"target ready in {time.monotonic() - started:.0f}s ({checkpoint})\n")


# The embedded trainers' environments a campaign's commands.train.argv[0] may name, by that path (relative to
# the checkout, the services' working directory), and the script that builds (or finds ready) each and prints
# its interpreter: the example EAGLE-3 trainer's `speculators` environment.
ENVIRONMENTS: dict[str, str] = {".venv-speculators/bin/python": "infra/bin/ensure-speculators-env"}


def ensure_trainer_env(campaign: Path, out: TextIO) -> None:
    """Build (or find ready) the embedded environment the campaign's trainer runs in; any other argv[0] is left
    alone. Refused when the script puts it elsewhere (SPECDEC_SPECULATORS_VENV) than the path the argv names."""
    import yaml

    train = ((yaml.safe_load(campaign.read_text()) or {}).get("commands") or {}).get("train") or {}
    program = str((train.get("argv") or [""])[0])
    script = ENVIRONMENTS.get(program)
    if script is None:
        return
    started = time.monotonic()
    # Fixed argv; the script prints the interpreter on stdout, its messages go to the terminal.
    done = subprocess.run([str(ROOT / script)], check=False, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise ConfigurationError(f"{script} could not build the trainer's environment (exit {done.returncode}; "
                                 "its messages are above): the campaign's trainer cannot run")
    built, named = Path(done.stdout.strip()), ROOT / program
    # The folders compared, not the interpreters: a venv's python is a link to the same system binary.
    if (built.parent.resolve(), built.name) != (named.parent.resolve(), named.name):
        raise ConfigurationError(f"{script} made the trainer's environment at {built.parent.parent}, but the "
                                 f"campaign's commands.train.argv[0] is {program}: unset SPECDEC_SPECULATORS_VENV "
                                 "or edit argv[0]")
    out.write(f"trainer environment ready in {time.monotonic() - started:.0f}s ({program})\n")


def _detail(event: dict) -> str:
    """What a progress line adds for the events that carry counts."""
    if event.get("schema") == "bench.trial.completed":
        done, failed = event.get("completed_requests", 0), event.get("failed_requests", 0)
        tpot = event.get("median_tpot_ms")
        spec = event.get("spec_decode") or {}
        length = spec.get("mean_acceptance_length")
        return (f"  | {event.get('cell_id')} trial {event.get('trial')} c={concurrency(event.get('concurrency'))}: "
                f"{done}/{done + failed} requests"
                + (f", median TPOT {ms(tpot)}" if tpot else "")
                + (f", acceptance length {length:.2f}" if length else ""))
    if event.get("schema") == "gate.decided" or str(event.get("schema", "")).endswith(".failed"):
        text = event_detail(event)
        return f"  | {text}" if text else ""
    return ""


def blocked_step(status: RunStatus) -> tuple[str, str] | None:
    """The first step that cannot progress: (step, why), or None while it can."""
    for step in status.steps:
        if step.state in ("done", "skipped"):
            continue
        if step.state == "failed":
            return step.step, f"failed: {step.detail}"
        if step.state == "unavailable":
            return step.step, f"no idle capacity: {step.detail}"
        owner = STEP_OWNER[step.step]
        if owner not in apps.available():
            return step.step, f"not run: its service ({owner}) is not built yet"
        return None
    return None


async def follow_run(settings: RuntimeSettings, run_id: str, out: TextIO, *, timeout_s: float) -> RunStatus:
    """The run's events, a line each, and its long steps' progress (bars on a terminal, periodic lines
    elsewhere: services/cli/progress_view.py), until it finishes, halts or `timeout_s` runs out."""
    view = progress_view(out)
    try:
        return await _follow(settings, run_id, view, timeout_s=timeout_s)
    finally:
        view.close()


async def _follow(settings: RuntimeSettings, run_id: str, view: ProgressView, *, timeout_s: float) -> RunStatus:
    async with connect(settings) as session:
        events: list[dict] = []
        started = time.monotonic()
        async for event in follow(session.client, settings.stream_prefix, from_start=True, progress=True):
            if event is not None and event.get("schema") == PROGRESS_SCHEMA:
                progress = progress_of(event)
                if progress is not None and progress.run_id == run_id:
                    view.progress(progress)
            elif event is not None and event.get("run_id") == run_id:
                events.append(event)
                status = run_status(run_id, events)
                elapsed = time.monotonic() - started
                view.line(f"[{elapsed:6.0f}s] {str(event.get('schema')):<22} {one_line(status)}{_detail(event)}")
                if blocked_step(status) is not None or status.steps[-1].state == "done":
                    return status
            if time.monotonic() - started > timeout_s:
                return run_status(run_id, events)
    raise AssertionError("unreachable")


def headline(bundle_dir: Path, out: TextIO) -> None:
    """The decision's objective per candidate and concurrency, with the identity it holds for."""
    import orjson

    decision_path = bundle_dir / layout.DECISION
    if not decision_path.is_file():
        return
    decision = orjson.loads(decision_path.read_bytes())
    out.write(
        f"decision: {decision['decision']}"
        + (f", winner {decision['winner']}" if decision.get("winner") else "")
        + "\n"
    )
    for candidate in decision.get("candidates", []):
        for level in candidate.get("levels", []):
            obj = level.get("objective") or {}
            interval = obj.get("interval") or {}
            # A failed or unmeasured candidate has null figures: print them as missing, never crash the summary.
            out.write(
                f"  {candidate['candidate']} @ concurrency {concurrency(level['concurrency'])}: {obj.get('metric')} "
                f"{number(obj.get('baseline_value'), '.2f')} -> {number(obj.get('candidate_value'), '.2f')} "
                f"{obj.get('unit', '')} ({number(obj.get('delta_pct'), '+.1f')} %, interval "
                f"{number(interval.get('low_pct'), '+.1f')}..{number(interval.get('high_pct'), '+.1f')} %, noise bound "
                f"{number(obj.get('noise_bound_pct'), '.1f')} %): {obj.get('verdict')}, "
                f"{obj.get('baseline_trials')} vs {obj.get('candidate_trials')} trials\n"
            )
    spent = trials_spent(decision)
    if spent:
        out.write(spent + "\n")
    results = sorted(bundle_dir.glob(layout.trial_result("*", 0, "*")))
    if results:
        ident = orjson.loads(results[0].read_bytes()).get("identity") or {}
        out.write(
            f"  identity: model {ident.get('model')}, hardware {ident.get('hardware')}, quantization "
            f"{ident.get('quantization') or 'none'}, tp {ident.get('parallelism', {}).get('tensor_parallel_size')}, "
            f"workload {ident.get('workload_shape')}, {ident.get('regime')} regime, "
            f"graph mode {ident.get('graph_mode')}, "
            f"source {ident.get('source_revision')}, baseline cell {decision.get('baseline')}\n"
        )


def trials_spent(decision: dict) -> str | None:
    """The trials per arm each concurrency level took and why it stopped (DECISION.json's `trials_used` and
    `stopped`), with the cap of the sequential rounds; None for a decision that records neither."""
    cap = (decision.get("thresholds") or {}).get("max_trials")
    by_level: dict[str, list[str]] = {}
    for candidate in decision.get("candidates", []):
        for level in candidate.get("levels", []):
            if level.get("trials_used") is None:
                continue
            where = concurrency(level.get("concurrency"), prefix="c=")
            by_level.setdefault(where, []).append(
                f"{candidate['candidate']} {level['trials_used']} ({level.get('stopped') or 'continues'})")
    if not by_level:
        return None
    head = f"trials spent per arm (cap {cap} per arm)" if cap is not None else "trials spent per arm (no cap)"
    return f"  {head}: " + "; ".join(f"{where}: {', '.join(parts)}" for where, parts in by_level.items())


def draft_origin(bundle_dir: Path) -> str | None:
    """"draft reused from <run>" when the trainer-proxy copied an earlier run's identical draft."""
    import orjson

    record = bundle_dir / layout.TRAINING_REUSE
    if not record.is_file():
        return None
    try:
        reuse = orjson.loads(record.read_bytes())
    except orjson.JSONDecodeError:
        return f"{layout.TRAINING_REUSE} is unreadable: see `specdec training plan {bundle_dir.name}`"
    return (f"draft reused from {reuse.get('reused_from')} (identical training inputs, key "
            f"{str(reuse.get('key'))[:12]}...; copied in {reuse.get('duration_s', 0):.1f}s, nothing trained)")


def summarize(status: RunStatus, bundle_dir: Path, out: TextIO) -> int:
    out.write("\n" + "=" * 72 + "\n")
    blocked = blocked_step(status)
    ran = [s.step for s in status.steps if s.state in ("done", "skipped")]
    out.write(f"run {status.run_id}\nsteps completed: {', '.join(ran) or 'none'}\n")
    for step in status.steps:
        if step.detail and step.state in ("done", "skipped"):
            out.write(f"  {step.step}: {step.detail}\n")
    origin = draft_origin(bundle_dir)
    if origin:
        out.write(origin + "\n")
    headline(bundle_dir, out)
    out.write(f"evidence bundle: {bundle_dir}\n")
    report = bundle_dir / layout.REPORT_HTML
    if report.is_file():
        out.write(f"report: {report}\n")
    if status.steps[-1].state == "done":
        out.write("campaign complete\n")
        return 0
    if blocked is None:
        out.write("the run did not finish in time; `specdec status` shows where it stands\n")
        return 1
    stopped, why = blocked
    index = [s.step for s in status.steps].index(stopped)
    not_run = [s.step for s in status.steps[index:]]
    out.write(f"stopped at {stopped}: {why}\n")
    out.write(f"did not run: {', '.join(not_run)}\n")
    return 1 if why.startswith(("failed", "no idle")) else 0


def main(argv: list[str] | None = None) -> int:
    from services.runtime.environment import startup_problem

    problem = startup_problem()  # first: a misspelt SPECDEC_* variable would be ignored
    if problem is not None:
        print(f"specdec demo: {problem}", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="specdec demo", description=__doc__)
    parser.add_argument("--campaign", default=str(DEMO_CAMPAIGN))
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="give up following the run after this many seconds"
    )
    args = parser.parse_args(argv)
    try:
        return _run(Path(args.campaign), args.timeout, sys.stdout)
    except SpecdecError as exc:
        # Bad input (a campaign submit refuses, Redis not answering): the reasons alone, no traceback.
        print(f"specdec demo: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specdec demo: stopped; its services and their servers were stopped", file=sys.stderr)
        return 130


def _run(campaign: Path, timeout_s: float, out: TextIO) -> int:
    settings = RuntimeSettings()
    # Every check submit makes, before a model is built or a service started.
    checked = validate(campaign)
    if not checked.accepted:
        lines = "\n".join(f"  - {p}" for p in checked.problems)
        print(f"specdec demo: campaign {campaign} cannot be submitted; nothing was started:\n{lines}", file=sys.stderr)
        return 2
    ensure_target(campaign, out)
    ensure_trainer_env(campaign, out)
    names = apps.available()
    out.write(f"starting services: {', '.join(names)}\n")
    if apps.missing():
        out.write(f"not built yet: {', '.join(apps.missing())}\n")
    log_dir = ROOT / ".run" / "demo-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    out.write(f"service logs: {log_dir}\n")
    children = start(names, log_dir=str(log_dir))
    run_id: str | None = None
    previous = signal.signal(signal.SIGTERM, _stopped)  # SIGTERM stops the demo as Ctrl-C does: through `finally`
    try:
        run_id = asyncio.run(_submit(settings, campaign))
        out.write(f"submitted {campaign} as run {run_id}\n")
        status = asyncio.run(follow_run(settings, run_id, out, timeout_s=timeout_s))
        return summarize(status, settings.bundle_root.resolve() / run_id, out)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the stop short
        stop(children, grace_s=stop_grace_s(settings.shutdown_grace_s))
        if run_id is not None:
            # The demo's run is the demo's alone: whatever still carries its label once every
            # service has stopped (a server whose service was SIGKILLed) is ended here.
            ended = end_labelled(run_id, deployment=deployment_id(settings.redis_url, settings.stream_prefix))
            if ended:
                out.write(f"ended {len(ended)} process group(s) still labelled experiment={run_id}\n")
        signal.signal(signal.SIGTERM, previous)


class DemoStopped(KeyboardInterrupt):
    """SIGTERM reached the demo: it stops its services and their servers, as on Ctrl-C."""


def _stopped(signum: int, frame: object) -> None:
    raise DemoStopped(f"stopped by signal {signum}")


async def _submit(settings: RuntimeSettings, campaign: Path) -> str:
    async with connect(settings) as session:
        return await submit(session, campaign)


if __name__ == "__main__":
    sys.exit(main())
