"""Evaluation of a cell's outputs: built-in agreement with the standing cell, or the operator's eval.

Speculative decoding is lossless, so at temperature 0 a candidate must return the standing cell's texts
for the same prompts, compared as sent back (no normalisation). What an operator's eval command gets and
must print: docs/bench-loadgen.md#evaluation-evaluatepy."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

import orjson

from contracts.argv import ArgvTemplate
from contracts.artifacts.results import Evaluation
from services.bench.errors import EvalError
from services.bench.loadgen.loadgen import WindowRecord
from services.runtime.processes import workload_env
from services.runtime.processes.procs import kill_group, spawn
from services.shared.secret_args import mask_argv, mask_text

_TAIL_CHARS = 2000


def window_outputs(window: WindowRecord) -> dict[str, str]:
    """prompt_id -> generated text of the window's successful requests."""
    return {r.prompt_id: r.text for r in window.requests if r.ok}


def agreement(standing: Mapping[str, str], candidate: Mapping[str, str]) -> Evaluation:
    """Share of prompts answered by both arms with identical text (pure)."""
    common = sorted(set(standing) & set(candidate))
    if not common:
        raise EvalError(
            "the standing and candidate windows share no successfully answered prompt: "
            "send both the same prompts, and check the failed requests of each"
        )
    same = sum(standing[key] == candidate[key] for key in common)
    return Evaluation(agreement_rate=same / len(common), samples=len(common))


def agreement_of_windows(standing: WindowRecord, candidate: WindowRecord) -> Evaluation:
    """Agreement of two windows; both must have run greedy (temperature 0) with the same budgets."""
    for name, window in (("standing", standing), ("candidate", candidate)):
        if window.spec.temperature != 0:
            raise EvalError(
                f"the {name} window ran at temperature {window.spec.temperature}: agreement is only meaningful "
                "at temperature 0 (greedy); run the evaluated windows with temperature 0"
            )
    return agreement(window_outputs(standing), window_outputs(candidate))


def run_eval_command(
    template: ArgvTemplate,
    *,
    base_url: str,
    run_id: str,
    values: Mapping[str, str] | None = None,
    timeout_s: float = 3600.0,
    service: str = "bench-runner",
    env: Mapping[str, str] | None = None,
) -> Evaluation:
    """Run the operator's eval against `base_url` and read its accuracy (blocking; use a thread from async code),
    in `env` (a workload's; services/runtime/processes/workload_env.py builds it, the platform's variables only
    when None)."""
    argv = template.render({**(values or {}), "base_url": base_url, "run_id": run_id})
    shown = mask_argv(argv)
    try:
        proc = spawn(argv, run_id=run_id, service=service, env=workload_env.environment() if env is None else env,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as err:
        raise EvalError(
            f"cannot start the eval command {argv[0]!r}: {err.strerror or err}; check commands.eval"
        ) from err
    try:
        out, err_bytes = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid, grace_s=2.0)  # its own process group: pid == pgid
        try:
            proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            # A grandchild that left the group still holds the pipes; the figure is lost either way.
            proc.kill()
        raise EvalError(f"the eval command ran past its timeout of {timeout_s:g} s and was killed: {shown!r}") from None
    if proc.returncode != 0:
        raise EvalError(mask_text(
            f"the eval command exited with status {proc.returncode}: {shown!r}; stderr tail: {_tail(err_bytes)}"
        ))
    return parse_eval_output(out)


def parse_eval_output(stdout: bytes) -> Evaluation:
    """`{"accuracy": float}` from the eval's stdout: all of it, else its last non-empty line."""
    candidates = [stdout.strip()]
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if lines:
        candidates.append(lines[-1])
    for text in candidates:
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return _evaluation(data)
    raise EvalError(
        f'the eval command printed no JSON object {{"accuracy": <0..1>}} on stdout; it printed: {_tail(stdout)}'
    )


def _evaluation(data: Mapping[str, object]) -> Evaluation:
    accuracy = data.get("accuracy")
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 0 <= accuracy <= 1:
        raise EvalError(f"the eval's `accuracy` must be a number in [0, 1], got {accuracy!r}")
    samples = data.get("samples")
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 0):
        raise EvalError(f"the eval's `samples` must be a non-negative integer when given, got {samples!r}")
    return Evaluation(accuracy=float(accuracy), samples=samples)


def _tail(data: bytes) -> str:
    text = data.decode(errors="replace").strip()
    return text[-_TAIL_CHARS:] if text else "(empty)"
