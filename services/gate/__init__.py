"""The gate: turns trial results into a promote / reject / inconclusive decision that survives noise.

Entry points: `decide_files` (trial result JSONs on disk) and the pure `decide`
(already loaded `contracts.artifacts.results.Trial`s); both return a
`contracts.artifacts.decision.Decision` (DECISION.json).
"""

from services.gate.decide import decide, decide_files, split_by_role
from services.gate.errors import GateError, GateInputError, GateSpecError, ResultFileError
from services.gate.results import load_trials

__all__ = [
    "GateError",
    "GateInputError",
    "GateSpecError",
    "ResultFileError",
    "decide",
    "decide_files",
    "load_trials",
    "split_by_role",
]
