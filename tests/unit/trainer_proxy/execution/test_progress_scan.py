"""The trainer's progress read from its output in the declared form, and relayed (execution/progress.py; pure,
scripted clock)."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from contracts.campaign.commands import TrainProgress
from services.trainer_proxy.execution.progress import ProgressRelay, ProgressScanner, Reading, Reporter, Update

JSON = TrainProgress(format="json")
REGEX = TrainProgress(format="regex", pattern=r"step (?P<step>\d+)/(?P<total>\d+) loss=(?P<loss>\S+)")


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_json_lines_give_step_total_and_loss_whatever_else_the_line_holds():
    scanner = ProgressScanner(JSON)
    scanner.feed("stdout", json.dumps({"step": 3, "total": 100, "loss": 2.25, "acc": [0.5]}).encode() + b"\n")
    assert scanner.latest == Reading(step=3, total=100, loss=2.25)
    # Not readings: another object, a step that is not a whole number, text, a summary line.
    for line in ({"event": "summary", "final_loss": 1.0}, {"step": "three"}, {"step": -1}, {"step": True}):
        scanner.feed("stdout", json.dumps(line).encode() + b"\n")
    scanner.feed("stderr", b"train_eagle3: head: 1 layer(s)\n")
    assert scanner.latest == Reading(step=3, total=100, loss=2.25)
    assert (scanner.lines, scanner.matches) == (6, 1)


def test_a_line_split_across_chunks_is_read_once_whole_and_streams_are_kept_apart():
    scanner = ProgressScanner(REGEX)
    scanner.feed("stdout", b"step 4/1")
    scanner.feed("stderr", b"warning: slow\n")
    assert scanner.latest is None
    scanner.feed("stdout", b"0 loss=0.5\nstep 5/10 loss=0.25")
    assert scanner.latest == Reading(step=4, total=10, loss=0.5)
    scanner.finish()  # the trainer ended mid-line: its last line is still read
    assert scanner.latest == Reading(step=5, total=10, loss=0.25)


def test_a_regex_without_total_or_loss_and_a_non_finite_loss_give_none_for_them():
    scanner = ProgressScanner(TrainProgress(format="regex", pattern=r"it (?P<step>\d+)"))
    scanner.feed("stdout", b"it 7 of many\n")
    assert scanner.latest == Reading(step=7, total=None, loss=None)
    scanner = ProgressScanner(JSON)
    scanner.feed("stdout", b'{"step": 2, "total": 0, "loss": NaN}\n')
    assert scanner.latest == Reading(step=2, total=None, loss=None)


@pytest.mark.parametrize("form", [{"format": "regex"}, {"format": "json", "pattern": "x"},
                                  {"format": "regex", "pattern": "("}, {"format": "regex", "pattern": r"(?P<s>\d)"},
                                  {"format": "regex", "pattern": r"(?P<step>\d) (?P<epoch>\d)"},
                                  {"format": "csv"}, {"format": "json", "every": 2}])
def test_a_form_that_cannot_be_read_is_refused_naming_the_field(form):
    with pytest.raises(ValidationError) as caught:
        TrainProgress.model_validate(form)
    # The model's own refusals name the campaign field; pydantic's (an unknown key or format) name theirs.
    named = ("commands.train.progress" if form.get("format") == "regex" or "pattern" in form
             else next(iter(form.keys() - {"format"}), "format"))
    assert named in str(caught.value), str(caught.value)


def test_the_relay_sends_the_newest_reading_at_most_every_interval_with_elapsed_and_eta():
    clock = Clock()
    relay = ProgressRelay(REGEX, clock=clock, every_s=2.0)
    relay.start(1000.0)
    assert relay.due() is None  # nothing read yet
    relay.scanner.feed("stdout", b"step 1/10 loss=3.0\n")
    clock.now = 1001.0
    assert relay.due() == Update(done=1, total=10, loss=3.0, eta_s=9.0, elapsed_s=1.0)
    relay.scanner.feed("stdout", b"step 2/10 loss=2.0\nstep 3/10 loss=1.5\n")
    clock.now = 1002.5
    assert relay.due() is None  # within the interval: held back
    clock.now = 1003.0
    assert relay.due() == Update(done=3, total=10, loss=1.5, eta_s=pytest.approx(7.0), elapsed_s=3.0)
    clock.now = 1010.0
    assert relay.due() is None  # nothing new since
    relay.scanner.feed("stdout", b"step 10/10 loss=0.5\n")
    clock.now = 1010.5
    relay.scanner.feed("stdout", b"")
    assert relay.due(final=True) == Update(done=10, total=10, loss=0.5, eta_s=0.0, elapsed_s=10.5)


def test_the_eta_is_paced_from_the_first_step_relayed_not_from_the_trainers_slow_start():
    clock = Clock()
    relay = ProgressRelay(REGEX, clock=clock, every_s=2.0)
    relay.start(1000.0)
    relay.scanner.feed("stdout", b"step 1/100 loss=3.0\n")
    clock.now = 1480.0  # eight minutes of loading and labelling before the first step
    assert relay.due() == Update(done=1, total=100, loss=3.0, eta_s=pytest.approx(480.0 * 99), elapsed_s=480.0)
    relay.scanner.feed("stdout", b"step 11/100 loss=2.0\n")
    clock.now = 1490.0  # ten steps in ten seconds
    assert relay.due() == Update(done=11, total=100, loss=2.0, eta_s=pytest.approx(89.0), elapsed_s=490.0)


def test_a_declared_form_that_never_matches_is_warned_once_after_a_while_or_at_the_end():
    clock = Clock()
    relay = ProgressRelay(JSON, clock=clock, warn_after_s=60.0)
    relay.start(1000.0)
    assert relay.warning() is None  # no output at all yet: nothing to judge
    relay.scanner.feed("stdout", b"epoch 1 loss=2.0\n")
    clock.now = 1030.0
    assert relay.warning() is None
    clock.now = 1061.0
    warning = relay.warning()
    assert warning is not None and "commands.train.progress" in warning and "1 output line" in warning
    assert relay.warning(final=True) is None  # once

    ended = ProgressRelay(JSON, clock=Clock())
    ended.start(1000.0)
    ended.scanner.feed("stdout", b"done\n")
    assert ended.warning(final=True) is not None

    matching = ProgressRelay(JSON, clock=Clock())
    matching.start(1000.0)
    matching.scanner.feed("stdout", b'{"step": 1}\nnoise\n')
    assert matching.warning(final=True) is None


def test_the_reporter_publishes_updates_and_warns_through_what_it_is_given():
    clock = Clock()
    published: list[Update] = []
    warnings: list[str] = []

    async def publish(update: Update) -> None:
        published.append(update)

    reporter = Reporter(ProgressRelay(REGEX, clock=clock), publish, warnings.append)
    reporter.start(1000.0)
    reporter.scanner.feed("stdout", b"step 1/2 loss=1.0\nstep 2/2 loss=0.5")
    asyncio.run(reporter.tick())
    asyncio.run(reporter.tick(final=True))  # reads the unterminated last line, forced past the interval
    assert [u.done for u in published] == [1, 2] and warnings == []
