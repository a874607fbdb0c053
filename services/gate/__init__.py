"""The gate: turns trial results into a promote / reject / inconclusive decision that survives noise.

Entry points: `decide_files` (trial result JSONs on disk) and the pure `decide`
(already loaded `Trial`s); both return a `Decision` (DECISION.json).
"""

from services.gate.decide import decide, decide_files, split_by_role
from services.gate.errors import GateError, GateInputError, GateSpecError, ResultFileError
from services.gate.model import Decision
from services.gate.results import Trial, load_trials, parse_trial

__all__ = [
    "Decision",
    "GateError",
    "GateInputError",
    "GateSpecError",
    "ResultFileError",
    "Trial",
    "decide",
    "decide_files",
    "load_trials",
    "parse_trial",
    "split_by_role",
]
