"""What every executor reports, and the watch over a trainer's output files.

The executors (local, slurm) write the trainer's stdout and stderr to files in
the bundle and poll them while it runs: the loss scanners see every byte as
it lands, so a non-finite loss stops the trainer at once; the progress scanner
(progress.py, when the campaign declares commands.train.progress) sees the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from services.trainer_proxy.execution.loss import LossFinding, LossScanner, LossSummary
from services.trainer_proxy.execution.progress import ProgressScanner

_READ_BYTES = 4 << 20


@dataclass
class RunOutcome:
    """How one trainer run ended, as its executor saw it."""

    handle: str
    launched_argv: list[str]
    exit_code: int | None
    signal: int | None
    duration_s: float
    timed_out: bool = False
    stopped_for_loss: bool = False
    # True when an earlier delivery launched the trainer and never captured it
    # (the service stopped or died); what it left is captured as partial.
    interrupted: bool = False
    # Set when the executor failed (argv[0] missing, sbatch refused, the job vanished).
    launch_error: str | None = None
    losses: list[LossSummary] = field(default_factory=list)
    # Slurm: the scheduler's last word on the job (scontrol's one-line record).
    scheduler_record: str | None = None

    @property
    def non_finite(self) -> LossFinding | None:
        for summary in self.losses:
            if summary.non_finite is not None:
                return summary.non_finite
        return None


class OutputWatch:
    """Tails named files (stdout, stderr) and feeds each to its loss scanner (and to the progress scanner)."""

    def __init__(self, files: dict[str, Path], progress: ProgressScanner | None = None) -> None:
        self.files = files
        self.offsets = {name: 0 for name in files}
        self.scanners = {name: LossScanner(name) for name in files}
        self.progress = progress

    def poll(self) -> LossFinding | None:
        """Read what was appended since the last poll; the first non-finite loss seen so far."""
        for name, path in self.files.items():
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets[name])
                    while chunk := fh.read(_READ_BYTES):
                        self.offsets[name] += len(chunk)
                        self.scanners[name].feed(chunk)
                        if self.progress is not None:
                            self.progress.feed(name, chunk)
            except FileNotFoundError:
                # Slurm creates the files when the job starts; nothing to read yet.
                continue
        for scanner in self.scanners.values():
            if scanner.finding is not None:
                return scanner.finding
        return None

    def finish(self) -> list[LossSummary]:
        self.poll()
        return [scanner.finish() for scanner in self.scanners.values()]
