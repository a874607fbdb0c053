"""The named inputs of `<step>.requested`: which names each step reads.

A request's `inputs` replace what an earlier step would have produced (re-bench
an existing draft, train on another corpus). A name no step reads would be
accepted and ignored: a typo (`trainng.output`) re-runs the step on the run's
own artifacts while the operator believes it used theirs. So this table is the
one list of names: the steps read their inputs by these constants, `specdec
request` refuses any other name before it publishes, and every
`<step>.requested` event refuses one when it is built or read (a request from
another client is dead-lettered with the reason, never run on the wrong input).

Traced from the steps' code: the profiler, corpus, capacity and gate steps and
the publisher (report, publish) read no named input (they work from the run's
campaign and bundle); the trainer-proxy reads `corpus`; the bench-runner reads
`training.output` and `corpus`.
"""

from __future__ import annotations

from collections.abc import Iterable

TRAINING_OUTPUT = "training.output"
CORPUS = "corpus"

_CORPUS_TRAIN = "a CORPUS.jsonl to train on (its train split), instead of the run's own corpus"
_CORPUS_BENCH = "a CORPUS.jsonl whose heldout split is measured (traffic campaigns), instead of the run's own corpus"
_DRAFT = "the trained draft (its folder, or a file in it) that '{training.output}' cells serve"

# step -> {input name: what it stands for}; every step of contracts.events.STEPS has a row.
STEP_INPUTS: dict[str, dict[str, str]] = {
    "profile": {},
    "corpus": {},
    "capacity": {},
    "training": {CORPUS: _CORPUS_TRAIN},
    "bench": {TRAINING_OUTPUT: _DRAFT, CORPUS: _CORPUS_BENCH},
    "gate": {},
    "report": {},
    "publish": {},
}


def input_problem(step: str, names: Iterable[str]) -> str | None:
    """Why `names` cannot be inputs of `step`, in words; None when every name is read by it."""
    known = STEP_INPUTS.get(step, {})
    unknown = sorted(set(names) - set(known))
    if not unknown:
        return None
    if not known:
        return (f"the {step} step reads no named input (it works from the run's own campaign and bundle), "
                f"got {unknown}: drop --input")
    listed = "; ".join(f"{name} ({what})" for name, what in known.items())
    return f"the {step} step reads no input named {unknown}: its inputs are {listed}"
