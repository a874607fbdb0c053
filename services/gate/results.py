"""Read trial result files into `Trial`s: the only I/O of the gate's domain.

What a file holds and how it is parsed is `contracts.artifacts.results` (the publisher
reads the same way); here the files are opened, and every unreadable one is
named at once so that an operator fixes them in one pass. The bench's rejected
trials are read apart (`load_rejected`): only to be named, never counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson

from contracts.artifacts.trials import Trial, parse_trial
from services.gate.checks import Rejected
from services.gate.errors import ResultFileError


def load_trials(paths: Iterable[Path]) -> list[Trial]:
    """Every file as a Trial; raises ResultFileError naming every unreadable file at once."""
    trials: list[Trial] = []
    problems: list[str] = []
    for path in paths:
        try:
            raw = orjson.loads(Path(path).read_bytes())
        except OSError as err:
            problems.append(f"{path}: cannot read ({err.strerror or err})")
            continue
        except orjson.JSONDecodeError as err:
            problems.append(f"{path}: not JSON ({err})")
            continue
        try:
            trials.append(parse_trial(raw, source=str(path)))
        except ValueError as err:  # pydantic's ValidationError is a ValueError
            problems.append(f"{path}: {err}")
    if problems:
        raise ResultFileError(problems)
    return trials


def load_rejected(paths: Iterable[Path]) -> list[Rejected]:
    """The trials the bench rejected (`rejected-c<k>.json`), with the reasons it recorded.

    Never counted, only named: a file that cannot be parsed is still listed, by its path."""
    rejected = []
    for path in paths:
        try:
            raw = orjson.loads(Path(path).read_bytes())
        except (OSError, orjson.JSONDecodeError) as err:
            rejected.append(Rejected(source=str(path), trial=None, reasons=(f"unreadable ({err})",), by="the bench"))
            continue
        reasons = raw.get("speculation_problems") if isinstance(raw, dict) else None
        reasons = tuple(str(r) for r in reasons) if isinstance(reasons, list) and reasons else ("no reason recorded",)
        try:
            trial = parse_trial(raw, source=str(path))
        except ValueError:
            trial = None
        rejected.append(Rejected(source=str(path), trial=trial, reasons=reasons, by="the bench"))
    return rejected
