"""The stand-in server's decode pace with seeded run-to-run noise (tests/support/fake_vllm.py).

`--fake-token-ms MS` sets the time of one decode step (one streamed chunk: one
token, or several with speculation); without it the stand-in keeps its 2 ms
step. `--fake-trial-cv CV` multiplies that step by a factor drawn from a
lognormal with sd CV (of the logs), `--fake-seed S` seeding the draws: a stand-in
whose per-trial figures vary from window to window as a real engine's do
(acceptance, clocks, neighbours), with a known true pace.

A window is what the bench measures between its two /metrics scrapes (warm-up,
scrape, measured requests, scrape), so the factor is drawn anew at each scrape
that follows a completion request: the measured requests of every window share
one factor of their own, and scrapes with no request between them (start-up
read-backs) draw nothing.
"""

from __future__ import annotations

import argparse
import random

DEFAULT_STEP_S = 0.002


class Pace:
    """The time of the next decode step, redrawn per window."""

    def __init__(self, token_ms: float | None = None, trial_cv: float = 0.0, seed: int = 0) -> None:
        self.step_s = DEFAULT_STEP_S if token_ms is None else token_ms / 1000
        self.trial_cv = trial_cv
        self.rng = random.Random(seed)
        self.factor = 1.0
        self.served = False  # a completion since the last draw

    def scraped(self) -> None:
        """A /metrics scrape: a window begins or ends."""
        if self.served and self.trial_cv:
            self.factor = self.rng.lognormvariate(0.0, self.trial_cv)
        self.served = False

    def step(self) -> float:
        """Seconds of one decode step of the current window."""
        self.served = True
        return self.step_s * self.factor

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--fake-token-ms", type=float, help="ms per decode step (default 2)")
        parser.add_argument("--fake-trial-cv", type=float, default=0.0, help="per-window lognormal sd of the step")
        parser.add_argument("--fake-seed", type=int, default=0, help="seed of the per-window draws")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Pace:
        return cls(args.fake_token_ms, args.fake_trial_cv, args.fake_seed)
