"""The campaign file (documented field by field in infra/examples/campaign.yaml), version 1.

A campaign is one YAML document. `missing_inputs()` names every input the
workflow needs that a raw campaign lacks, all at once, before pydantic's type
checks: an operator fixes a campaign in one pass, not one error at a time.

The parts, one module each; every name is re-exported here, so importers
write `from contracts.campaign import X` whichever module defines X:

- `speculative`: `SpeculativeConfig` (vLLM's --speculative-config), the
  methods (`SpecMethod`, `METHODS_WITH_MODEL`, `SUFFIX_KEYS`) and
  `TRAINED_DRAFT`, the model name of the draft the campaign trains;
- `traffic`: where the prompts come from, `TrafficFile` or `TrafficShapes`,
  the corpus drawn from traffic (`CorpusSpec`) and `HELDOUT_SHAPE`;
- `commands`: the operator's commands (`Commands`, `TrainCommand` with
  `checked_subdir`, `ArgvCommand`) and `CapacitySpec` with its `Scheduler`;
- `matrix`: the cells (`Cell`, `ServingConfig`, `VllmSweep`), the measured
  load (`LoadSpec`, `effective_ignore_eos`), and `Matrix` inline or as a
  `MatrixFile`;
- `gate`: `GateSpec`, its METRIC[:STAT] grammar (`OBJECTIVE_RE`,
  `LATENCY_OBJECTIVES`) and its bounds (`GATE_MIN_TRIALS`,
  `GATE_MIN_TRIALS_CAMPAIGN`, `DEFAULT_MIN_EFFECT_PCT`, `MAX_TRIALS_CAP`);
- `review`: `ReviewPolicy` (the plans that run without a separate approval,
  `REVIEWED_STEPS`), `PublishSpec` and the `Acknowledgements` both need;
- `campaign`: `Campaign` with `Target` and `SourceRevisions`, the checks that
  span its parts, and `missing_inputs()`.

Imports run one way: `matrix` uses `speculative`, `campaign` uses every other
part, and the rest use no sibling.

Two modules belong to the campaign file without being re-exported, imported
by their own path: `schedule` (a cell's k per batch size, vLLM's
num_speculative_tokens_per_batch_size; `speculative` checks it) and
`canonical` (the workflow's canonical matrix file, accepted as written).
"""

from __future__ import annotations

from contracts.campaign.campaign import CAMPAIGN_VERSION, Campaign, SourceRevisions, Target, missing_inputs
from contracts.campaign.commands import (
    ArgvCommand,
    Builtin,
    CapacitySpec,
    Commands,
    Scheduler,
    TrainCommand,
    TrainProgress,
    checked_subdir,
)
from contracts.campaign.gate import (
    DEFAULT_MIN_EFFECT_PCT,
    GATE_MIN_TRIALS,
    GATE_MIN_TRIALS_CAMPAIGN,
    LATENCY_OBJECTIVES,
    MAX_TRIALS_CAP,
    OBJECTIVE_RE,
    GateSpec,
)
from contracts.campaign.matrix import Cell, LoadSpec, Matrix, MatrixFile, ServingConfig, VllmSweep, effective_ignore_eos
from contracts.campaign.review import (
    EXTERNAL_PUBLISH,
    PRE_APPROVABLE_STEPS,
    REVIEWED_STEPS,
    Acknowledgements,
    PreApprovedStep,
    PublishSpec,
    ReviewedStep,
    ReviewPolicy,
)
from contracts.campaign.speculative import METHODS_WITH_MODEL, SUFFIX_KEYS, TRAINED_DRAFT, SpecMethod, SpeculativeConfig
from contracts.campaign.traffic import HELDOUT_SHAPE, CorpusSpec, TrafficFile, TrafficShapes

__all__ = [
    "CAMPAIGN_VERSION",
    "DEFAULT_MIN_EFFECT_PCT",
    "EXTERNAL_PUBLISH",
    "GATE_MIN_TRIALS",
    "GATE_MIN_TRIALS_CAMPAIGN",
    "HELDOUT_SHAPE",
    "LATENCY_OBJECTIVES",
    "MAX_TRIALS_CAP",
    "METHODS_WITH_MODEL",
    "OBJECTIVE_RE",
    "PRE_APPROVABLE_STEPS",
    "REVIEWED_STEPS",
    "SUFFIX_KEYS",
    "TRAINED_DRAFT",
    "Acknowledgements",
    "ArgvCommand",
    "Builtin",
    "Campaign",
    "CapacitySpec",
    "Cell",
    "Commands",
    "CorpusSpec",
    "GateSpec",
    "LoadSpec",
    "Matrix",
    "MatrixFile",
    "PreApprovedStep",
    "PublishSpec",
    "ReviewPolicy",
    "ReviewedStep",
    "Scheduler",
    "ServingConfig",
    "SourceRevisions",
    "SpecMethod",
    "SpeculativeConfig",
    "Target",
    "TrafficFile",
    "TrafficShapes",
    "TrainCommand",
    "TrainProgress",
    "VllmSweep",
    "checked_subdir",
    "effective_ignore_eos",
    "missing_inputs",
]
