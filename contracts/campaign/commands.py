"""The operator's commands (trainer, serve, bench, eval) and the capacity they run on."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from contracts.argv import ArgvTemplate
from contracts.envelope import Strict

Scheduler = Literal["local", "slurm", "kubernetes"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by specdec on every process it starts (services/runtime/processes/procs.py): a declaration could not change them.
_LABELS = frozenset({"SPECDEC_EXPERIMENT", "SPECDEC_SERVICE", "SPECDEC_DEPLOYMENT"})


def _env_names(names: list[str]) -> list[str]:
    for name in names:
        if not _ENV_NAME.match(name):
            raise ValueError(f"env name {name!r} is not a variable name: letters, digits and '_', not starting with a "
                             "digit (give the name only, e.g. HF_TOKEN; the value is read from the service's "
                             "environment at launch)")
        if name in _LABELS:
            raise ValueError(f"env name {name} is the experiment label specdec sets itself on every process it starts: "
                             "remove it")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"env names {repeated} are listed more than once: list each variable once")
    return names


DeclaredEnv = Annotated[list[str], AfterValidator(_env_names)]
"""Names of variables a command gets from the service's environment at launch (docs/configuration.md,
"The workload's environment"): the values are never written to the bundle, the names are in the plan."""


def env_field(what: str) -> DeclaredEnv:
    """The `env` field of a command: which variables of the service's environment `what` gets."""
    return Field(
        default_factory=list,
        description=f"Names of variables {what} gets from the service's environment at launch (e.g. [HF_TOKEN]), "
        "beyond the platform's own (PATH, HOME, locale, CUDA/vLLM tuning; docs/configuration.md, \"The workload's "
        "environment\"). The values are read at launch and never written to the bundle; the names appear in the "
        "reviewed plan; a name unset at launch fails the launch naming it. specdec's own credentials "
        "(SPECDEC_REDIS_URL, the token variables, AWS_*) reach a workload only when named here.",
    )


class ArgvCommand(Strict):
    """An operator command as an argv template."""

    argv: ArgvTemplate = Field(description="Argv template; no shell, whitelisted {placeholders}.")


def checked_subdir(value: str) -> str:
    """`value` as a folder below {output_dir} (normalised: 'a//b/' is 'a/b'); ValueError naming why not."""
    what = f"commands.train.checkpoint_subdir {value!r}"
    if not value.strip():
        raise ValueError(f"{what} is empty: give the checkpoint's folder relative to {{output_dir}}, or null for it")
    if "\0" in value or "\\" in value:
        raise ValueError(f"{what} holds a NUL or a backslash: name folders with '/' between them")
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{what} is absolute: give a folder relative to {{output_dir}} ('9' for --epochs 10)")
    parts = PurePosixPath(value).parts
    if ".." in parts:
        raise ValueError(f"{what} climbs out of {{output_dir}} with '..': the checkpoint must lie below it")
    if "{" in value or "}" in value:
        raise ValueError(f"{what} holds a brace: it is a literal folder name, no placeholder is filled in it")
    normalised = PurePosixPath(*[part for part in parts if part != "."]).as_posix() if parts else "."
    if normalised == ".":
        raise ValueError(f"{what} names {{output_dir}} itself: leave it null")
    return normalised


# The named groups a progress pattern may hold; `step` is required.
PROGRESS_GROUPS = frozenset({"step", "total", "loss"})


class TrainProgress(Strict):
    """How the trainer prints its progress, so that the trainer-proxy relays it (`step.progress`, docs/trainer-proxy.md).

    Each line of the trainer's stdout and stderr is read as it is written. `json`: a line that is a JSON object
    with an integer `step` (and optionally an integer `total` and a number `loss`) at its top level, as
    infra/examples/train_eagle3.py prints them. `regex`: a line in which `pattern` matches (Python `re.search`),
    its named group `step` (required), `total` and `loss` (optional) giving the figures."""  # noqa: E501 - the JSON schema's description, kept as is

    format: Literal["json", "regex"] = Field(
        description="json: JSON-object lines with `step`, optional `total` and `loss` keys; regex: lines `pattern` "
        "matches.")
    pattern: str | None = Field(
        default=None,
        description="With format regex (and only then): a Python regular expression with the named group `step` "
        "(digits) and optionally `total` (digits) and `loss` (a number), e.g. "
        "'step (?P<step>\\d+)/(?P<total>\\d+) loss=(?P<loss>\\S+)'. No other named group.")

    @model_validator(mode="after")
    def _pattern_fits_format(self) -> TrainProgress:
        what = "commands.train.progress.pattern"
        if self.format == "json":
            if self.pattern is not None:
                raise ValueError(f"{what} is set with format json, which reads keys and no pattern: remove it, or "
                                 "use format regex")
            return self
        if self.pattern is None:
            raise ValueError(f"format regex needs {what}: a regular expression with the named group step")
        try:
            compiled = re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"{what} {self.pattern!r} is not a regular expression: {exc}") from None
        groups = set(compiled.groupindex)
        if "step" not in groups:
            raise ValueError(f"{what} {self.pattern!r} has no named group step: write (?P<step>\\d+) where the step is")
        if groups - PROGRESS_GROUPS:
            raise ValueError(f"{what} {self.pattern!r} has named groups {sorted(groups - PROGRESS_GROUPS)} that "
                             "nothing reads: name only step, total and loss")
        return self


class TrainCommand(Strict):
    """The operator's trainer."""

    argv: ArgvTemplate = Field(description="Trainer argv template.")
    probe: ArgvTemplate | None = Field(
        default=None, description="Optional capture-correctness probe, run on the output; non-zero exit fails training."
    )
    timeout_s: float = Field(
        default=3600.0, gt=0, description="Wall-time limit; past it the trainer and its children are killed."
    )
    kubernetes_job: str | None = Field(
        default=None,
        description="Path of the operator's Kubernetes Job manifest template (YAML), used with scheduler kubernetes; "
        "specdec sets its name, experiment label, command, node and deadline. Unset: specdec renders a Job itself.",
    )
    reuse: bool = Field(
        default=True,
        description="Reuse the draft of an earlier run in the same bundle root whose training inputs were identical "
        "(same training input key: train split, argv, target files, revisions, probe, executor) and whose draft files "
        "still hash as recorded; the plan names that run before approval and nothing is launched. false: always train.",
    )
    env: DeclaredEnv = env_field("the trainer and its probe")
    checkpoint_subdir: str | None = Field(
        default=None,
        description="The checkpoint's folder relative to {output_dir}, for trainers that save below it (speculators "
        "train: the last epoch's folder, '9' for --epochs 10). The probes, the draft cost, {training.output} and the "
        "training.completed event use {output_dir}/<checkpoint_subdir>; every file under {output_dir} is still hashed "
        "and kept. A relative path without '..'; part of the training input key. Unset: {output_dir} itself.",
    )

    progress: TrainProgress | None = Field(
        default=None,
        description="How the trainer prints its progress (step, total, loss), which the trainer-proxy relays as "
        "step.progress events for `specdec watch` and `specdec demo`; a declared form no line matches is logged "
        "once as a warning. Not part of the training input key (it changes nothing trained). Unset: no progress "
        "is relayed.",
    )

    @field_validator("checkpoint_subdir")
    @classmethod
    def _relative_subdir(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return checked_subdir(value)


Builtin = Literal["builtin"]


class Commands(Strict):
    """The operator's commands. serve, bench and eval must be set, to an argv or to 'builtin'."""

    train: TrainCommand | None = Field(
        default=None,
        description="Trainer; required when a cell serves '{training.output}' (traffic campaigns only), refused when "
        "none does (nothing would run it).",
    )
    serve: ArgvCommand | Builtin | None = Field(
        default=None, description="Serve command, or 'builtin' (vLLM's OpenAI server)."
    )
    bench: ArgvCommand | Builtin | None = Field(
        default=None, description="Bench command, or 'builtin' (specdec's load generator)."
    )
    eval: ArgvCommand | Builtin | None = Field(
        default=None, description="Eval command, or 'builtin' (agreement with the standing cell)."
    )
    serve_pod_template: str | None = Field(
        default=None,
        description="Path of the operator's Kubernetes Pod manifest template (YAML) for the bench servers, used with "
        "capacity.scheduler kubernetes; specdec sets its name, experiment label, command, port, node and readiness "
        "probe, and keeps the operator's image, resources, volumes and the rest. Unset: specdec renders a Pod itself.",
    )


class CapacitySpec(Strict):
    """Where the campaign may run, and the operator's idle-node check."""

    scheduler: Scheduler = Field(default="local", description="Scheduler to read and launch on.")
    selectors: dict[str, str] = Field(
        default_factory=dict,
        description="Scheduler selectors (string values); the keys per scheduler, their meaning and their "
        "consumers are contracts/selectors.py: slurm partition/nodelist/gres, kubernetes label_selector/"
        "tolerations/image/namespace/bundle_pvc/cpu/memory/gpu_resource, local: none.",
    )
    idle_check: ArgvTemplate | None = Field(
        default=None, description="Operator's idle-node check; exit status 0 means idle. Required."
    )
    idle_check_env: DeclaredEnv = env_field("the idle check")
