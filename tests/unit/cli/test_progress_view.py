"""How `specdec watch` and `specdec demo` show step.progress (services/cli/progress_view.py): bars on a terminal,
plain periodic lines elsewhere (scripted clock)."""

from __future__ import annotations

import io

from contracts.progress import StepProgress
from services.cli.progress_view import Bars, Lines, duration, plain, progress_view


def event(done: int, total: int | None = 100, *, step: str = "training", loss: float | None = 1.5,
          eta_s: float | None = 130.0) -> StepProgress:
    return StepProgress(run_id="run-1", producer="trainer-proxy/a", step=step, done=done, total=total,
                        unit="step" if step == "training" else "trial", loss=loss, eta_s=eta_s, elapsed_s=65.0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_plain_line_says_counts_loss_eta_and_elapsed():
    assert plain(event(30)) == "progress run-1 training: 30/100 steps (30%), loss 1.5, ETA 2m10s, elapsed 1m05s"
    assert plain(event(3, None, loss=None, eta_s=None)) == "progress run-1 training: 3 steps, ETA ?, elapsed 1m05s"
    assert plain(event(2, 8, step="bench", loss=None, eta_s=4000)) == (
        "progress run-1 bench: 2/8 trials (25%), ETA 1h06m, elapsed 1m05s")
    assert duration(59.4) == "59s" and duration(None) == "?"


def test_off_a_terminal_progress_is_a_line_per_step_per_interval_and_the_last_one():
    out, clock = io.StringIO(), Clock()
    view = Lines(out, clock=clock, every_s=15.0)
    view.line("12:00:01 run-1 training.started")
    for now, done in ((0.0, 1), (5.0, 10), (14.0, 20), (15.5, 30), (20.0, 100), (21.0, 100)):
        clock.now = now
        view.progress(event(done))
    clock.now = 22.0
    view.progress(event(1, 8, step="bench"))  # another step: its own interval
    lines = out.getvalue().splitlines()
    assert lines[0] == "12:00:01 run-1 training.started"
    assert [line.split(": ")[1].split(" steps")[0] for line in lines[1:4]] == ["1/100", "30/100", "100/100"]
    assert lines[4].startswith("progress run-1 bench: 1/8 trials") and len(lines) == 5


def test_on_a_terminal_each_step_gets_a_bar_under_the_event_lines():
    out = Terminal()
    view = progress_view(out)
    assert isinstance(view, Bars)
    view.line("12:00:01 run-1 training.started")
    view.progress(event(10))
    view.progress(event(50))
    view.progress(event(1, 8, step="bench", loss=None))
    view.close()
    text = out.getvalue()
    assert "12:00:01 run-1 training.started" in text
    assert "run-1 training" in text and "50/100 steps (50%)" in text and "loss 1.5" in text
    assert "run-1 bench" in text and "1/8 trials" in text
    assert isinstance(progress_view(io.StringIO()), Lines)
