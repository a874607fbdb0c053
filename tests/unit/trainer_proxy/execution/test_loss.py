"""Non-finite loss detection: both documented formats, every spelling, incremental."""

from __future__ import annotations

import math

import pytest

from services.trainer_proxy.execution.loss import MAX_LINE_BYTES, LossScanner, line_losses, parse_number, scan_bytes

NON_FINITE = ["nan", "NaN", "NAN", "-nan", "+nan", "nan(ind)", "-nan(ind)", "inf", "-inf", "+inf", "Infinity",
              "-Infinity", "INF", "1e999", "-1e999", "1.#QNAN", "1.#INF", "-1.#IND", "tensor(nan)"]


@pytest.mark.parametrize("spelling", NON_FINITE)
def test_every_spelling_of_a_non_finite_loss_in_text_is_found(spelling):
    summary = scan_bytes("stdout", f"step=3 loss={spelling} lr=0.1\n".encode())
    assert summary.non_finite is not None, spelling
    assert summary.non_finite.value.rstrip(")").startswith(spelling.rstrip(")")[:3])
    assert summary.non_finite.line_number == 1


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", '"nan"', '"-inf"', '"NaN"'])
def test_a_non_finite_loss_field_in_json_lines_is_found(value):
    summary = scan_bytes("stdout", f'{{"step": 1, "loss": 0.5}}\n{{"step": 2, "loss": {value}}}\n'.encode())
    assert summary.non_finite is not None
    assert summary.non_finite.line_number == 2 and summary.non_finite.key == "loss"
    assert summary.loss_values == 2 and summary.last_finite_loss == 0.5


def test_lowercase_nan_in_a_json_looking_line_is_still_found():
    # `{"loss": nan}` is not valid JSON (Python prints it so); the text rule catches it.
    assert scan_bytes("stdout", b'{"loss": nan}\n').non_finite is not None


def test_nested_and_suffixed_loss_keys_count():
    assert [k for k, _, _ in line_losses('{"metrics": {"eval_loss": "inf"}, "train_loss": 1.0}')] == [
        "eval_loss", "train_loss"]
    assert [k for k, _, _ in line_losses("epoch 1 train_loss=0.4 val_loss: nan")] == ["train_loss", "val_loss"]


def test_finite_losses_and_unrelated_fields_never_trigger():
    text = (
        b'{"step": 1, "loss": 2.5, "grad_norm": NaN}\n'
        b"closs=nan lossy=inf grad_norm=nan loss_scale=inf\n"
        b"loss=tensor(0.25, grad_fn=<NllLossBackward0>)\n"
        b"loss: see the table below\n"
        b"loss=1e-3\n"
    )
    summary = scan_bytes("stderr", text)
    assert summary.non_finite is None
    assert summary.loss_values == 3 and summary.last_finite_loss == pytest.approx(1e-3)


def test_the_scanner_is_incremental_across_chunk_boundaries():
    scanner = LossScanner("stdout")
    assert scanner.feed(b'{"loss": 1.0}\nlo') is None
    assert scanner.feed(b"ss=n") is None
    assert scanner.feed(b"an\n") is not None
    assert scanner.finding.line_number == 2


def test_an_unterminated_last_line_is_scanned_at_finish():
    scanner = LossScanner("stdout")
    assert scanner.feed(b"ok\nloss=inf") is None
    assert scanner.finish().non_finite is not None


def test_a_huge_line_without_newline_is_scanned_and_dropped():
    scanner = LossScanner("stdout")
    scanner.feed(b"loss=nan " + b"x" * (MAX_LINE_BYTES + 10))
    assert scanner.finding is not None and scanner._buffer._pending == b""


def test_parse_number():
    assert math.isnan(parse_number("nan,"))
    assert parse_number("0.5;") == 0.5
    assert parse_number("abc") is None
