"""The review point's policy, the publish target and the typed acknowledgements they need."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from contracts.envelope import Strict

# The steps that change the cluster and so pass the review point (services/runtime/review.py).
ReviewedStep = Literal["training", "bench"]
REVIEWED_STEPS: tuple[str, ...] = ("training", "bench")
# What review.pre_approve may name: the reviewed steps (their plans) and `publish`, a live external publish
# of the final report from the dry run the publisher records first (services/publisher/publish/publish_review.py).
# Publish has no plan and changes no cluster: the review point never waits on it (REVIEWED_STEPS).
PreApprovedStep = Literal["training", "bench", "publish"]
PRE_APPROVABLE_STEPS: tuple[str, ...] = (*REVIEWED_STEPS, "publish")
# Publish targets whose files leave this machine (services/publisher/publish/publish.py is_external).
EXTERNAL_PUBLISH = ("s3://", "https://", "http://")


class PublishSpec(Strict):
    """Where the report goes. Live publishing also needs the acknowledgement."""

    target: str = Field(
        default="file://published",
        description="file://DIR, https://URL (http:// too) or s3://BUCKET/PREFIX; relative file paths are under "
        "the bundle.",
    )

    @model_validator(mode="after")
    def _check_target(self) -> PublishSpec:
        if not self.target.startswith(("file://", "https://", "http://", "s3://")):
            raise ValueError(
                f"publish target {self.target!r} must start with file://, https://, http:// or s3:// "
                "(file://DIR, https://URL or s3://BUCKET/PREFIX)"
            )
        return self


class ReviewPolicy(Strict):
    """The review point (docs/design.md#the-review-point): which stored plans run without a separate approval."""

    pre_approve: list[PreApprovedStep] = Field(
        default_factory=list,
        description="Reviewed steps (training, bench) whose plan runs as soon as it is stored and announced, without "
        "a `specdec approve` naming its sha256, and publish: the publisher sends the final report live to the "
        "external publish.target (s3://, https://, http://) from the dry run it records first; each step once. "
        "training and bench need acknowledgements.i_understand_this_mutates_cluster: true (a policy is a mutation "
        "approval), publish needs acknowledgements.i_understand_this_publishes_externally: true and an external "
        "target. Empty (the default): every plan waits for an approval naming its hash, and an external publish "
        "stays a dry run until a call carrying the acknowledgement publishes it. Recorded in the bundle "
        "(campaign.json) and the report.",
    )

    @field_validator("pre_approve")
    @classmethod
    def _check_repeats(cls, value: list[str]) -> list[str]:
        repeated = sorted({step for step in value if value.count(step) > 1})
        if repeated:
            raise ValueError(f"review.pre_approve repeats {', '.join(repeated)}: list each step once")
        return value


class Acknowledgements(Strict):
    """Typed acknowledgements; both default to false."""

    i_understand_this_mutates_cluster: bool = Field(
        default=False,
        description="Acknowledge that this run's plans change the cluster. Alone it runs no plan: every plan is "
        "stored, announced and waits for `specdec approve` naming its sha256; review.pre_approve, which needs it, "
        "names the steps whose plans run without that approval. It lets the capacity step run the operator's "
        "capacity.idle_check; without it (a dry run) the node is selected from the scheduler's read-only view and "
        "the idle check runs only at the pre-launch re-check of an approved plan.",
    )
    i_understand_this_publishes_externally: bool = Field(
        default=False,
        description="Allow a live publish of the report to the publish target. To a folder (file://) it alone makes "
        "the publisher's publish live; to an external target (s3://, https://, http://) it takes effect only with "
        "review.pre_approve listing publish, which needs it: alone it publishes nothing live there (accepted but "
        "inert, contracts/inert.py), the dry run waits for a call carrying the acknowledgement.",
    )
