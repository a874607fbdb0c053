"""The campaign model: its target, revisions and the checks across its parts; `missing_inputs()`."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, model_validator

from contracts.campaign.commands import CapacitySpec, Commands, TrainCommand
from contracts.campaign.gate import GATE_MIN_TRIALS_CAMPAIGN, GateSpec
from contracts.campaign.matrix import Matrix, MatrixFile
from contracts.campaign.review import EXTERNAL_PUBLISH, REVIEWED_STEPS, Acknowledgements, PublishSpec, ReviewPolicy
from contracts.campaign.speculative import TRAINED_DRAFT, SpeculativeConfig
from contracts.campaign.traffic import CorpusSpec, TrafficFile, TrafficShapes
from contracts.envelope import Strict

CAMPAIGN_VERSION: Final = 1


class Target(Strict):
    """The served model the campaign speeds up."""

    checkpoint: str = Field(min_length=1, description="Path of the target checkpoint directory.")
    tokenizer: str | None = Field(default=None, description="Tokenizer directory; the checkpoint when unset.")
    max_model_len: int = Field(default=2048, ge=16, description="Maximum model length the target is served with.")

    @property
    def tokenizer_dir(self) -> str:
        return self.tokenizer or self.checkpoint


class SourceRevisions(Strict):
    """Revisions of everything the evidence depends on."""

    target: str | None = Field(
        default=None,
        description="Revision of the target checkpoint: enters the training input key; where nothing is trained "
        "(traffic.shapes, or no cell serves '{training.output}') a provenance label only, accepted but inert "
        "(contracts/inert.py).",
    )
    trainer: str | None = Field(
        default=None,
        description="Revision of the operator's trainer: enters the training input key; refused where nothing is "
        "trained (traffic.shapes, or no cell serves '{training.output}').",
    )
    serving: str | None = Field(default=None, description="Revision of the serving stack.")
    specdec: str | None = Field(default=None, description="specdec's own revision; filled in at submit.")
    suffix_decoding: str | None = Field(
        default=None, description="arctic-inference's version in the suffix cells' serving interpreter "
        "(arctic-inference==X); filled in at submit from submit's own installed packages where that interpreter is "
        "submit's own, None otherwise (no suffix cell, another interpreter: never run to ask).")


class Campaign(Strict):
    """A speculative-decoding campaign."""

    version: Literal[1] = Field(default=CAMPAIGN_VERSION, description="Campaign file version.")
    family: str = Field(
        pattern=r"^[a-z0-9][a-z0-9-]{0,30}$", description="Model family label used in names and reports."
    )
    target: Target = Field(description="The target model.")
    standing: SpeculativeConfig | None = Field(description="Speculative config served today; null for none.")
    traffic: TrafficFile | TrafficShapes = Field(description="Traffic JSONL path, or named workload shapes.")
    corpus: CorpusSpec = Field(default_factory=CorpusSpec, description="Corpus size, heldout share and seed.")
    commands: Commands = Field(description="The operator's commands.")
    capacity: CapacitySpec = Field(description="Scheduler, selectors and the idle-node check.")
    matrix: Matrix | MatrixFile = Field(description="The cells, inline or as a path.")
    gate: GateSpec = Field(description="Objective and floors.")
    publish: PublishSpec = Field(default_factory=PublishSpec, description="Report target.")
    review: ReviewPolicy = Field(
        default_factory=ReviewPolicy,
        description="The review point's pre-approval policy; by default every plan waits for an approval of its hash.",
    )
    acknowledgements: Acknowledgements = Field(default_factory=Acknowledgements, description="Typed acknowledgements.")
    source_revisions: SourceRevisions = Field(default_factory=SourceRevisions, description="Source revisions.")

    @property
    def shapes_only(self) -> bool:
        return isinstance(self.traffic, TrafficShapes)

    @property
    def trains_nothing(self) -> bool:
        """True when no training can run: named shapes, or an inline matrix no cell of which serves the
        trained draft. A matrix still given as a path is unknown here (False): submit inlines it and validates again."""
        if self.shapes_only:
            return True
        return isinstance(self.matrix, Matrix) and not any(
            cell.serving.speculative is not None and cell.serving.speculative.needs_training
            for cell in self.matrix.cells
        )

    @model_validator(mode="after")
    def _check_complete(self) -> Campaign:
        missing = missing_inputs(self.model_dump(by_alias=True))
        if missing:
            raise ValueError("campaign lacks required inputs: " + "; ".join(missing))
        unread = [g for g in self.gate.guards if g.startswith("acceptance")] if self.standing is None else []
        if unread:
            raise ValueError(
                f"gate.guards {unread}: the standing config is null (no speculation), so the baseline has no "
                "acceptance figure to compare with; set gate.acceptance_floor or gate.acceptance_length_floor for "
                "a minimum instead, or remove the guard"
            )
        if self.shapes_only and isinstance(self.matrix, Matrix):
            for cell in self.matrix.cells:
                spec = cell.serving.speculative
                if spec is not None and spec.needs_training:
                    raise ValueError(
                        f"cell {cell.cell_id} needs a trained draft, but a shapes-only campaign has no traffic "
                        "to train on: use ngram/suffix or name an existing draft checkpoint"
                    )
        return self

    @model_validator(mode="after")
    def _check_gate_trials(self) -> Campaign:
        # An inline matrix only: a matrix given as a path is read and stored inline at submit, and the
        # stored campaign is validated again there.
        if (isinstance(self.matrix, Matrix) and not self.matrix.exploratory
                and self.gate.min_trials < GATE_MIN_TRIALS_CAMPAIGN):
            raise ValueError(
                f"gate.min_trials {self.gate.min_trials} is below {GATE_MIN_TRIALS_CAMPAIGN}: a campaign needs at "
                f"least {GATE_MIN_TRIALS_CAMPAIGN} matched trials per arm; set gate.min_trials to "
                f"{GATE_MIN_TRIALS_CAMPAIGN} or more, or matrix.exploratory: true for a DRAFT"
            )
        return self

    @model_validator(mode="after")
    def _check_shapes_only(self) -> Campaign:
        # Named shapes give prompts but no traffic: nothing builds a corpus or trains, so these would be ignored.
        if not isinstance(self.traffic, TrafficShapes):
            return self
        unused = [f"corpus.{name}" for name, value in self.corpus if value != getattr(CorpusSpec(), name)]
        if self.commands.train is not None:
            unused.insert(0, "commands.train")
        # The trainer's revision enters only the training input key (what makes a draft reusable).
        if self.source_revisions.trainer is not None:
            unused.append("source_revisions.trainer")
        if unused:
            raise ValueError(
                f"{', '.join(unused)} set, but traffic is named shapes ({', '.join(self.traffic.shapes)}): a shapes "
                "campaign builds no corpus and trains nothing, so nothing would read them; remove them, or give "
                "traffic.path (a traffic JSONL)"
            )
        return self

    @model_validator(mode="after")
    def _check_unused_trainer(self) -> Campaign:
        # With traffic but no cell serving `{training.output}`, the trainer-proxy records training as skipped:
        # a trainer and what only a training reads would be accepted and ignored
        # (docs/design.md#principle-1-no-inert-configuration).
        # Shapes campaigns are _check_shapes_only's and _check_review's (same fields, their own reason).
        if self.shapes_only or not self.trains_nothing:
            return self
        why = f"no cell serves the draft this campaign trains (speculative model {TRAINED_DRAFT!r}), so nothing trains"
        problems = []
        train = self.commands.train
        if train is not None:
            # Named so the operator sees what goes with it; an explicit default (`kubernetes_job: null`) is not news.
            parts = sorted(name for name in train.model_fields_set - {"argv"}
                           if getattr(train, name) != TrainCommand.model_fields[name].default)
            given = f" (with {', '.join(parts)})" if parts else ""
            problems.append(f"commands.train{given} is set, but {why}: remove commands.train, or serve "
                            f"{TRAINED_DRAFT!r} in a cell")
        if self.source_revisions.trainer is not None:
            problems.append(f"source_revisions.trainer is set, but {why} and only a training reads it: remove it")
        if "training" in self.review.pre_approve:
            problems.append(f"review.pre_approve lists training, but {why} and there is no training plan to "
                            "pre-approve: remove training from review.pre_approve")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def publishes_externally(self) -> bool:
        """Whether publish.target sends the report off this machine (s3://, https://, http://)."""
        return self.publish.target.startswith(EXTERNAL_PUBLISH)

    @model_validator(mode="after")
    def _check_review(self) -> Campaign:
        steps = self.review.pre_approve
        plans = [step for step in steps if step in REVIEWED_STEPS]
        if plans and not self.acknowledgements.i_understand_this_mutates_cluster:
            raise ValueError(
                f"review.pre_approve {plans} runs those plans without a separate approval, which changes the cluster: "
                "it needs acknowledgements.i_understand_this_mutates_cluster: true; set the acknowledgement, or remove "
                "them from review.pre_approve (every plan then waits for `specdec approve RUN_ID "
                "--i-understand-this-mutates-cluster`)"
            )
        if "publish" in steps:
            # The policy is the review of an external publish; a folder needs none (the acknowledgement alone
            # writes it), so there it would change nothing.
            problems = []
            if not self.acknowledgements.i_understand_this_publishes_externally:
                problems.append(
                    "review.pre_approve lists publish, which sends the final report to publish.target without a "
                    "separate acknowledged call: it needs acknowledgements.i_understand_this_publishes_externally: "
                    "true; set the acknowledgement, or remove publish from review.pre_approve (the report then stays a "
                    "dry run until `specdec publish RUN_ID --i-understand-this-publishes-externally` publishes it)"
                )
            if not self.publishes_externally:
                problems.append(
                    f"review.pre_approve lists publish, but publish.target {self.publish.target!r} is a folder on this "
                    "machine, not external (s3://, https://, http://): the acknowledgement alone writes it and there "
                    "is no external publish to pre-approve; remove publish from review.pre_approve"
                )
            if problems:
                raise ValueError("; ".join(problems))
        # A shapes campaign trains nothing (training is recorded as skipped): there is no plan to pre-approve.
        if "training" in steps and self.shapes_only:
            raise ValueError(
                "review.pre_approve lists training, but traffic is named shapes: a shapes campaign trains nothing, so "
                "there is no training plan to pre-approve; remove training from review.pre_approve"
            )
        return self

    @model_validator(mode="after")
    def _check_kubernetes_templates(self) -> Campaign:
        # The Job and Pod templates are read only by the Kubernetes executors: on another scheduler they would be
        # ignored.
        scheduler = self.capacity.scheduler
        if scheduler == "kubernetes":
            return self._check_kubernetes_env()
        train = self.commands.train
        unused = [name for name, value in (("commands.train.kubernetes_job", train.kubernetes_job if train else None),
                                           ("commands.serve_pod_template", self.commands.serve_pod_template)) if value]
        if unused:
            raise ValueError(
                f"{' and '.join(unused)} set, but capacity.scheduler is {scheduler}: these Kubernetes manifest "
                f"templates are used only with capacity.scheduler: kubernetes; remove them or set the scheduler to "
                f"kubernetes"
            )
        return self

    def _check_kubernetes_env(self) -> Campaign:
        # A Pod or Job gets its environment from its manifest, never from the service's: a declared name would
        # be read by nothing there (the idle check runs beside the service, so its env still passes).
        train = self.commands.train
        declared = [f"commands.train.env {train.env}"] if train is not None and train.env else []
        if isinstance(self.matrix, Matrix):
            declared += [f"matrix cell {cell.cell_id} env {cell.env}" for cell in self.matrix.cells if cell.env]
        if declared:
            raise ValueError(
                f"{'; '.join(declared)} declared, but capacity.scheduler is kubernetes: a Pod or Job gets no variable "
                "from the service's environment; reference a Kubernetes Secret in the manifest template "
                "(commands.train.kubernetes_job, commands.serve_pod_template) and remove the env names"
            )
        return self


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _cells_train(matrix: Any) -> bool:
    """Whether a raw inline matrix has a cell serving the draft the campaign trains (`{training.output}`)."""
    cells = _get(matrix, "cells")
    if not isinstance(cells, list):
        return False
    return any(_get(cell, "serving", "speculative", "model") == TRAINED_DRAFT for cell in cells)


def missing_inputs(data: Any) -> list[str]:
    """Every required workflow input absent from a raw campaign mapping, in words."""
    if not isinstance(data, dict):
        return ["the campaign must be a YAML mapping"]
    missing: list[str] = []
    if not _get(data, "target", "checkpoint"):
        missing.append("target.checkpoint (path of the target checkpoint)")
    if "standing" not in data:
        missing.append("standing (the speculative config served today; write `standing: null` for none)")
    traffic = data.get("traffic")
    if not (_get(traffic, "path") or _get(traffic, "shapes")):
        missing.append("traffic (traffic.path: a traffic JSONL, or traffic.shapes: named workload shapes)")
    shapes_only = bool(_get(traffic, "shapes")) and not _get(traffic, "path")
    # Only a cell serving `{training.output}` makes the run train. A matrix given as a path is not read
    # here (no I/O in contracts): submit stores it inline and validates the campaign again, which asks then.
    if not shapes_only and _cells_train(data.get("matrix")) and not _get(data, "commands", "train", "argv"):
        missing.append("commands.train.argv (the operator's trainer; required when a cell serves the draft this "
                       "campaign trains, speculative model '{training.output}')")
    for name in ("serve", "bench", "eval"):
        value = _get(data, "commands", name)
        if value != "builtin" and not _get(value, "argv"):
            missing.append(f"commands.{name} (an argv template, or the explicit choice `builtin`)")
    matrix = data.get("matrix")
    if not (_get(matrix, "cells") or _get(matrix, "path")):
        missing.append("matrix (matrix.cells inline, or matrix.path)")
    if not _get(data, "capacity", "idle_check"):
        missing.append("capacity.idle_check (the operator's idle-node check argv; exit 0 means idle)")
    if not _get(data, "gate", "objective"):
        missing.append("gate.objective (the latency objective, e.g. tpot or tpot:p99)")
    floors = ("acceptance_floor", "acceptance_length_floor", "accuracy_floor")
    if all(_get(data, "gate", floor) is None for floor in floors):
        missing.append("a floor: gate.acceptance_floor, gate.acceptance_length_floor or gate.accuracy_floor")
    return missing
