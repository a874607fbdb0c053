"""The report records the review point: for each plan, the approval that ran it (event ID, who,
the hashes it named) or the campaign's pre-approval policy, and the policy itself."""

from __future__ import annotations

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from contracts.events import BenchPlanned, RunApproved, TrainingPlanned
from services.publisher.pipeline import render_run
from services.publisher.publish.review_record import plan_reviews, review_section
from services.publisher.report.aggregate import read_campaign
from services.publisher.report.document import Document, to_markdown
from tests.unit.publisher.synthetic import RUN, Spec, build


def _plan(bundle, path: str) -> ArtifactRef:
    return bundle.write_json(RUN, path, {"launches": [path]})


def _append(bundle, event) -> None:
    bundle.append_event(RUN, event.event_id, event.to_json())


def test_the_report_names_the_approval_that_ran_the_plan_and_that_the_campaign_has_no_policy(store):
    build(store, Spec())
    plan = _plan(store, "bench/plan.json")
    _append(store, BenchPlanned(run_id=RUN, producer="bench-runner/t", plan=plan, cells=["standing", "ngram-k3"],
                                trials=3))
    approval = RunApproved(run_id=RUN, producer="cli/t", i_understand_this_mutates_cluster=True,
                           plan_sha256s=[plan.sha256], approved_by="ops@host")
    _append(store, approval)
    md = render_run(store, RUN).report.markdown.decode()
    section = md[md.index('<a id="review"></a>'):md.index('<a id="identity"></a>')]
    assert "Pre-approval policy: none (review.pre_approve is empty" in section
    assert f"| bench | {plan.uri} | {plan.sha256} | approval run.approved {approval.event_id} (ops@host) |" in section
    assert f"it named plan sha256 {plan.sha256}" in section


def test_a_pre_approved_plan_is_recorded_as_run_by_the_policy_and_an_unapproved_one_as_not_run(store):
    build(store, Spec())
    training, bench = _plan(store, "training/plan.json"), _plan(store, "bench/plan.json")
    _append(store, TrainingPlanned(run_id=RUN, producer="trainer-proxy/t", plan=training, executor="local", node="n1"))
    _append(store, BenchPlanned(run_id=RUN, producer="bench-runner/t", plan=bench, cells=["standing"], trials=3))
    data = read_campaign(store, RUN)
    assert data.campaign is not None
    policy = Campaign.model_validate(data.campaign.model_dump(by_alias=True) | {
        "review": {"pre_approve": ["bench"]},
        "acknowledgements": {"i_understand_this_mutates_cluster": True,
                             "i_understand_this_publishes_externally": False},
    })
    events = list(store.events(RUN))
    data = data.model_copy(update={"campaign": policy, "reviews": plan_reviews(events, policy)})
    section = review_section(data)
    md = to_markdown(Document(title="t", draft_reasons=(), sections=(section,)), plots_dir="plots")
    assert ("Pre-approval policy: review.pre_approve bench, with acknowledgements.i_understand_this_mutates_cluster "
            "true") in md
    assert f"| bench | {bench.uri} | {bench.sha256} | the campaign's pre-approval policy |" in md
    assert f"| training | {training.uri} | {training.sha256} | none: the plan did not run |" in md
    assert f"specdec approve {RUN} --i-understand-this-mutates-cluster" in md


def test_a_run_without_plans_says_so(clean):
    _, out = clean
    md = out.report.markdown.decode()
    assert "No plan was announced in this run." in md
