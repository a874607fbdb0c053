"""Built-in agreement and the operator's eval command."""

from __future__ import annotations

import sys

import pytest

from contracts.argv import ArgvTemplate
from services.bench.errors import EvalError
from services.bench.evaluate import agreement, agreement_of_windows, parse_eval_output, run_eval_command
from services.bench.loadgen.loadgen import WindowRecord, WindowSpec
from services.bench.loadgen.timing import RequestRecord

RUN_ID = "eval-unit-run"


def window(texts: dict[str, str | None], *, temperature: float = 0.0) -> WindowRecord:
    records = []
    for i, (pid, text) in enumerate(texts.items()):
        ok = text is not None
        records.append(
            RequestRecord(
                index=i,
                prompt_id=pid,
                scheduled_s=0,
                start_s=0,
                end_s=1,
                chunk_arrival_s=[0.5] if ok else [],
                chunk_tokens=[1] if ok else None,
                output_tokens=1 if ok else None,
                prompt_tokens=1,
                status_code=200 if ok else 500,
                error_kind=None if ok else "http_500",
                error=None if ok else "x",
                finish_reason=None,
                text=text or "",
            )
        )
    return WindowRecord(spec=WindowSpec(base_url="http://x:1", model="m", temperature=temperature), duration_s=1,
                        requests=records, warmup_completed=0, warmup_failed=0, max_in_flight=1,
                        metrics_before="", metrics_after="", metrics_error=None)


def test_agreement_counts_identical_outputs_on_common_prompts():
    result = agreement({"a": "x", "b": "y", "c": "z", "d": "w"}, {"a": "x", "b": "y!", "c": "z", "e": "v"})
    assert result.samples == 3 and result.agreement_rate == pytest.approx(2 / 3) and result.accuracy is None


def test_agreement_of_windows_skips_failures_and_needs_greedy():
    standing = window({"a": "x", "b": "y", "c": None})
    candidate = window({"a": "x", "b": "q", "c": "z"})
    result = agreement_of_windows(standing, candidate)
    assert result.samples == 2 and result.agreement_rate == 0.5
    with pytest.raises(EvalError, match="temperature 0"):
        agreement_of_windows(standing, window({"a": "x"}, temperature=0.7))
    with pytest.raises(EvalError, match="share no"):
        agreement_of_windows(window({"a": None}), window({"a": "x"}))


def script(code: str) -> ArgvTemplate:
    # `{` and `}` in a template token are placeholders: literal braces are doubled.
    return ArgvTemplate([sys.executable, "-c", code.replace("{", "{{").replace("}", "}}"), "{base_url}"])


def test_eval_command_gets_base_url_and_label():
    code = ("import json, os, sys; print('loading...'); "
            "ok = sys.argv[1] == 'http://127.0.0.1:9999' and os.environ['SPECDEC_EXPERIMENT'] == 'eval-unit-run'; "
            "print(json.dumps({'accuracy': 0.8 if ok else 0.1, 'samples': 50}))")
    result = run_eval_command(script(code), base_url="http://127.0.0.1:9999", run_id=RUN_ID, timeout_s=30)
    assert result.accuracy == pytest.approx(0.8) and result.samples == 50


def test_eval_command_failures_are_explained():
    with pytest.raises(EvalError, match="status 3.*bad dataset"):
        run_eval_command(script("import sys; sys.stderr.write('bad dataset'); sys.exit(3)"),
                         base_url="http://h:1", run_id=RUN_ID, timeout_s=30)
    with pytest.raises(EvalError, match="timeout of 0.5 s"):
        run_eval_command(script("import time; time.sleep(30)"), base_url="http://h:1", run_id=RUN_ID, timeout_s=0.5)
    with pytest.raises(EvalError, match="cannot start"):
        run_eval_command(ArgvTemplate(["/nonexistent/eval-bin"]), base_url="http://h:1", run_id=RUN_ID)


@pytest.mark.parametrize(
    ("stdout", "message"),
    [(b"no json here\n", "no JSON object"), (b'{"accuracy": 1.5}', r"\[0, 1\]"), (b'{"accuracy": "0.5"}', "number"),
     (b'{"acc": 0.5}', "accuracy"), (b'{"accuracy": 0.5, "samples": -1}', "samples")],
)
def test_eval_output_must_be_an_accuracy(stdout, message):
    with pytest.raises(EvalError, match=message):
        parse_eval_output(stdout)


def test_eval_output_whole_or_last_line():
    assert parse_eval_output(b'{\n  "accuracy": 0.25\n}\n').accuracy == 0.25
    assert parse_eval_output(b'step 1\nstep 2\n{"accuracy": 1}\n').accuracy == 1.0
