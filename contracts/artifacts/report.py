"""report/report.json, version 1: what a rendered report says about itself.

The publisher writes it when it renders a run's report and reads it back to
publish that report (which files, DRAFT or not); a reviewer's tooling can read
the DRAFT flag and its reasons without parsing the Markdown. No I/O here.

Versioning: `version` stays 1 while changes only add optional fields (with a
default), so a report.json written before a field existed still validates (the
publisher reads earlier reports back to publish them). The prediction figures
(`speedups`, `stops_paying`, `ngram_settings`, `draft_relative_cost`,
`offline_acceptance`, `schedules`) are such fields; docs/publisher.md defines them.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from contracts.envelope import Key, RunId, Sha256, Strict

SUMMARY_VERSION: Final = 1


class SpeedupFigure(Strict):
    """One speculative candidate at one concurrency level: predicted L / (1 + k c) beside realized."""

    cell_id: Key = Field(description="The candidate cell.")
    concurrency: int | None = Field(description="Concurrency level; None when the load had no limit.")
    method: str = Field(description="Its speculative method.")
    num_speculative_tokens: int = Field(ge=1, description="k, the tokens per draft the cell declares.")
    mean_acceptance_length: float | None = Field(
        description="L = 1 + accepted / drafts, pooled over the level's trials; None when no trial proposed a draft."
    )
    relative_draft_cost: float | None = Field(
        description="c, the draft's per-token cost relative to the target's: 0 for ngram and suffix, "
        "training/draft-cost.json for draft_model; None when not measured."
    )
    predicted: float | None = Field(description="L / (1 + k c); None without L or c.")
    realized: float | None = Field(
        description="TPOT(baseline) / TPOT(candidate), geometric means of per-trial median TPOT at the level; "
        "None without both."
    )
    note: str = Field(description="Where c comes from, or why there is no prediction, in words.")


class StopsPayingFigure(Strict):
    """Where one candidate's realized speedup stops paying over its measured levels."""

    cell_id: Key = Field(description="The candidate cell.")
    stops_at: int | None = Field(
        description="The lowest concurrency level with realized speedup <= 1 after a level above 1; None when none."
    )
    verdict: Literal["stops", "pays_everywhere", "pays_nowhere", "pays_from", "unmeasured"] = Field(
        description="stops (at stops_at), pays_everywhere, pays_nowhere, pays_from (pays only from some level up) "
        "or unmeasured (no realized speedup)."
    )
    finding: str = Field(description="The finding in words, as the report states it.")


class NgramSettingsFigure(Strict):
    """One ngram candidate's settings beside the profile's ngram advice."""

    cell_id: Key = Field(description="The ngram candidate cell.")
    num_speculative_tokens: int = Field(ge=1, description="The cell's k.")
    prompt_lookup_min: int | None = Field(description="The cell's prompt_lookup_min; None when not set.")
    prompt_lookup_max: int | None = Field(description="The cell's prompt_lookup_max; None when not set.")
    advised_num_speculative_tokens: int | None = Field(description="The profile's advised k; None without advice.")
    advised_prompt_lookup_min: int | None = Field(description="The advised prompt_lookup_min; None without advice.")
    advised_prompt_lookup_max: int | None = Field(description="The advised prompt_lookup_max; None without advice.")
    agree: bool | None = Field(description="True when all three are equal; None when there is no advice to compare.")
    differing: list[str] = Field(
        description="The settings that differ (num_speculative_tokens, prompt_lookup_min/max)."
    )
    comparison: str = Field(description="The report's sentence: agree, which differ, or why nothing is compared.")


class ScheduleLevelFigure(Strict):
    """One measured level of a candidate's k per concurrency (docs/publisher.md, "A k per concurrency")."""

    concurrency: int | None = Field(description="Concurrency level; None when the load had no limit.")
    cost: float = Field(ge=0, description="c_l: the measured cost per drafted token at this level.")
    cost_source: str = Field(description="Where c_l comes from (the realized speedup, or the draft's own cost).")
    best_k: int = Field(ge=0, description="The k with the highest predicted speedup at this level (0: none).")
    predicted_speedup: float = Field(description="Predicted speedup over the standing cell at best_k.")
    measured_tpot_ms: float | None = Field(description="The candidate's TPOT at its measured k; None without one.")
    predicted_tpot_ms: float | None = Field(description="Predicted TPOT at best_k; None without a baseline TPOT.")
    predicted_fixed_tpot_ms: float | None = Field(description="Predicted TPOT at the best fixed k; None without a "
                                                  "baseline TPOT.")


class ScheduleFigure(Strict):
    """One speculative candidate's k per concurrency, as vLLM's num_speculative_tokens_per_batch_size."""

    cell_id: Key = Field(description="The candidate cell the schedule is predicted from.")
    measured_k: int = Field(ge=1, description="The k it was measured with.")
    schedule: list[tuple[int, int, int]] = Field(description="[[start_bs, end_bs, k], ...], inclusive, from 1.")
    fixed_k: int = Field(ge=1, description="The best fixed k over the measured levels.")
    gain_over_fixed_pct: float = Field(description="Predicted geometric-mean gain of the schedule over fixed_k, %.")
    chosen: bool = Field(description="True for the schedule the report proposes (the highest predicted speedup).")
    levels: list[ScheduleLevelFigure] = Field(description="Per measured level, ascending concurrency.")


class OfflineAcceptanceFigure(Strict):
    """One trained-draft candidate at one level: the trainer's offline a_j beside the served a_j."""

    cell_id: Key = Field(description="The candidate cell serving the draft this run trained.")
    concurrency: int | None = Field(description="Concurrency level; None when the load had no limit.")
    offline_per_position: list[float] = Field(
        description="a_j estimated offline: accepted_per_position[j] / drafts of offline-acceptance.json, j = 1..k.")
    served_per_position: list[float] | None = Field(
        description="a_j served: accepted at position j / drafts, pooled over the level's trials; None without drafts.")
    error_per_position: list[float] = Field(
        description="served - offline over the positions both have (the smaller k); empty without drafts.")
    offline_acceptance_length: float = Field(ge=1, description="1 + the sum of the offline a_j.")
    served_acceptance_length: float | None = Field(description="1 + the sum of the served a_j; None without drafts.")
    acceptance_length_error: float | None = Field(
        description="served - offline length; None without drafts or when the two k differ (different positions).")
    note: str = Field(description="Why a figure is missing (no drafts, k differs), in words; empty when all are set.")


class ReportSummary(Strict):
    """report/report.json: what the rendered report says about itself."""

    version: Literal[1] = Field(default=SUMMARY_VERSION, description="Version of this summary.")
    run_id: RunId = Field(description="The run.")
    draft: bool = Field(description="True when the report is marked DRAFT.")
    draft_reasons: list[str] = Field(description="Every reason for the DRAFT marking; empty for a final report.")
    decision: str | None = Field(description="The gate's decision the report shows; None without one.")
    decision_sha256: Sha256 | None = Field(description="sha256 of the DECISION.json the report was rendered from.")
    plots: list[str] = Field(description="Plot files under report/plots/, in report order.")
    levers: list[str] = Field(description="Rules of the levers in the last section, the next one first.")
    speedups: list[SpeedupFigure] = Field(
        default_factory=list,
        description="Predicted (with the draft's cost) and realized speedup per candidate and level.",
    )
    stops_paying: list[StopsPayingFigure] = Field(
        default_factory=list, description="Per speculative candidate, where its realized speedup stops paying."
    )
    ngram_settings: list[NgramSettingsFigure] = Field(
        default_factory=list, description="Every ngram candidate's settings beside the profile's advice."
    )
    draft_relative_cost: float | None = Field(
        default=None, description="The draft's per-token cost relative to the target's (training/draft-cost.json); "
        "None when not measured.",
    )
    offline_acceptance: list[OfflineAcceptanceFigure] = Field(
        default_factory=list, description="Per trained-draft candidate and level, the trainer's offline acceptance "
        "beside the served one (training/output/offline-acceptance.json); empty without a trained candidate or "
        "an estimate. The gate never reads it.",
    )
    schedules: list[ScheduleFigure] = Field(
        default_factory=list, description="Per speculative candidate, the predicted k per concurrency; the chosen "
        "one is the schedule the report proposes.",
    )
