"""The one way a step reads its run's campaign: `campaign.json`, stored by `specdec submit`.

A missing or invalid stored campaign is a permanent failure of the step that
needed it (`CampaignMissing` / `CampaignInvalid`), the same in every service:
retrying cannot bring it back.
"""

from __future__ import annotations

from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore
from services.runtime.errors import CampaignUnusable


def load_campaign(bundle: BundleStore, run_id: str) -> Campaign:
    """The run's stored campaign, hash-checked; CampaignUnusable when it cannot be used."""
    try:
        return Campaign.model_validate(bundle.read_json(run_id, layout.CAMPAIGN))
    except ArtifactMissing:
        raise CampaignUnusable(
            f"run {run_id} has no {layout.CAMPAIGN} in its bundle: submit the campaign (specdec submit) first",
            error_type="CampaignMissing",
        ) from None
    except (BundleError, ValidationError) as exc:
        raise CampaignUnusable(
            f"the stored campaign of run {run_id} is unusable: {exc}", error_type="CampaignInvalid"
        ) from None
