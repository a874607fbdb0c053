"""The items of issue #14 as cases of the guard: each is refused with a clear error
or consumed, and a revert of its fix makes its case fail.

Each case returns the problems it finds (empty: the item holds). Most run the
guard itself (guard.judge) on the field under every variant it concerns; the
others check the one rule the item adds (a label tied to the prompt source, a
corpus tied to the run's profile, the node in the identity), through the same
consumers the guard observes.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from contracts import layout
from tests.unit.guard.campaign_checks import CHECKS, Check, item_checks
from tests.unit.guard.context import OTHER_RUN, ROOT, RUN, Ctx
from tests.unit.guard.edits import both, put
from tests.unit.guard.guard import judge
from tests.unit.guard.observe import (
    Refused,
    _decision,
    baseline_of,
    bench_plan,
    names,
    observe_data,
    plan_trials,
    refusals,
    submitted,
)
from tests.unit.guard.variants import VARIANTS

Case = Callable[[Ctx], list[str]]


def _judged(ctx: Ctx, field: str, check: Check, variants: Any) -> list[str]:
    return [v for v in (judge(ctx, field, check, variant) for variant in variants) if v]


def _refused_or_consumed(ctx: Ctx, field: str, edit: Any, sees: tuple[str, ...], *, base: Any = None) -> list[str]:
    """Under every variant: the change is refused naming the field, or it changes what runs."""
    problems = []
    for variant in VARIANTS:
        data = variant.data()
        if base is not None:
            base(data, ctx)
        before = observe_data(ctx, data, sees)
        if refusals(before):
            problems.append(f"{variant.id}: the base campaign is refused: {refusals(before)[0]}")
            continue
        changed = copy.deepcopy(data)
        edit(changed, ctx)
        after = observe_data(ctx, changed, sees)
        found = refusals(after)
        if found and not any(names(r, field) for r in found):
            problems.append(f"{variant.id}: refused without naming {field}: {found[0]}")
        elif not found and after == before:
            problems.append(f"{variant.id}: {field} is accepted and changes nothing that runs ({', '.join(sees)})")
    return problems


def every_listed_shape_benched(ctx: Ctx) -> list[str]:
    """Each item of traffic.shapes reaches the requests, not only the first."""
    problems = []
    for variant in (v for v in VARIANTS if v.traffic == "shapes"):
        items = {f: c for f, c in item_checks(variant).items() if f.startswith("traffic.shapes[")}
        if len(items) < 2:
            problems.append(f"{variant.id}: the variant lists fewer than two shapes, so the item is not checked")
        problems += [p for f, c in items.items() for p in _judged(ctx, f, c, [variant])]
    return problems


def workload_shape_tied_to_the_prompt_source(ctx: Ctx) -> list[str]:
    """A label the prompt source contradicts, on every cell (so the gate sees no difference between
    arms), is refused naming workload_shape; and the label the trials carry follows the source."""
    problems = _refused_or_consumed(ctx, "workload_shape", put("matrix.cells.*.workload_shape", "bogus-shape"),
                                    ("requests", "gate_on_plan"))
    labels = {}
    for variant in VARIANTS:
        for shapes in (None, ["long"]):
            data = variant.data()
            if shapes is not None:
                if variant.traffic != "shapes":
                    continue
                data["traffic"]["shapes"] = shapes
            plan = bench_plan(ctx, submitted(ctx, data))  # type: ignore[arg-type]  # every variant submits
            if isinstance(plan, Refused):
                problems.append(f"{variant.id}: the bench plan is refused: {plan}")
                continue
            labels[(variant.id, str(shapes))] = {cell.identity["workload_shape"] for cell in plan.cells}
    file_labels = {frozenset(v) for (vid, _), v in labels.items() if vid.endswith(",file")}
    shape_labels = [frozenset(v) for (vid, _), v in labels.items() if vid.endswith(",shapes")]
    if any(label in file_labels for label in shape_labels):
        problems.append(f"a shapes campaign's trials carry the label of the corpus's heldout split: {labels}")
    for variant in (v for v in VARIANTS if v.traffic == "shapes"):
        if labels.get((variant.id, "None")) == labels.get((variant.id, "['long']")):
            problems.append(f"{variant.id}: the trials' label does not follow traffic.shapes: {labels}")
    return problems


def unknown_input_names_refused(ctx: Ctx) -> list[str]:
    from tests.unit.guard.cli_checks import request_outcome

    problems = []
    for step, name in (("bench", "trainng.output"), ("gate", "corpus"), ("training", "training.output")):
        published, refusal = request_outcome(ctx, step, name)
        if published or refusal is None or name not in refusal:
            problems.append(
                f"specdec request {step} --input {name}=...: published {published}, refusal {refusal!r}; "
                "an input name the step does not read must be refused, naming it, before anything is published"
            )
    return problems


def kubernetes_templates_refused_on_other_schedulers(ctx: Ctx) -> list[str]:
    problems = []
    others = [v for v in VARIANTS if v.executor != "kubernetes"]
    problems += _judged(ctx, "commands.serve_pod_template", CHECKS["commands.serve_pod_template"], others)
    problems += _judged(ctx, "commands.train.kubernetes_job", CHECKS["commands.train.kubernetes_job"],
                        [v for v in others if v.traffic == "file"])
    return problems


def relative_paths_in_matrix_path_resolved(ctx: Ctx) -> list[str]:
    """A relative model path inside a matrix.path file is served as the same absolute path as inline."""
    import yaml

    from services.app.campaign.prepare import absolutize, load_campaign

    folder = ctx.tmp / "relative"
    (folder / "models/rel-model").mkdir(parents=True, exist_ok=True)
    (folder / "models/rel-model/config.json").write_text("{}\n")
    expected = str((folder / "models/rel-model").resolve())
    served = {}
    for form in ("inline", "file"):
        data = VARIANTS[0].data()
        data["traffic"]["path"] = str(ROOT / data["traffic"]["path"])
        data["matrix"]["cells"][0].setdefault("serving", {})["model"] = "models/rel-model"
        if form == "file":
            (folder / "matrix.yaml").write_text(yaml.safe_dump(data["matrix"]))
            data["matrix"] = {"path": "matrix.yaml"}
        path = folder / f"campaign-{form}.yaml"
        path.write_text(yaml.safe_dump(data))
        with contextlib.chdir(folder):
            campaign = absolutize(load_campaign(path)[0], folder)
        plan = bench_plan(ctx, campaign)  # the services run elsewhere (here: the repository root)
        if isinstance(plan, Refused):
            return [f"{form}: the bench plan is refused: {plan}"]
        argv = next(cell.serve_argv for cell in plan.cells if cell.role == "standing")
        served[form] = argv[argv.index("--model") + 1]
    if served != {"inline": expected, "file": expected}:
        return [f"the standing cell's relative serving.model is served as {served}; both must be {expected}"]
    return []


def burstiness_without_request_rate(ctx: Ctx) -> list[str]:
    return _refused_or_consumed(ctx, "burstiness", put("matrix.load.burstiness", 0.5), ("requests",),
                                base=put("matrix.load.request_rate", None))


def min_trials_one(ctx: Ctx) -> list[str]:
    # 2 is allowed only in an exploratory matrix (min_trials_below_three_only_exploratory).
    return _refused_or_consumed(ctx, "min_trials", put("gate.min_trials", 1), ("gate",),
                                base=both(put("gate.min_trials", 2), put("matrix.exploratory", True)))


def min_trials_below_three_only_exploratory(ctx: Ctx) -> list[str]:
    """gate.min_trials 2 is refused naming min_trials unless the matrix is exploratory, where the gate uses it."""
    problems = []
    for variant in VARIANTS:
        data = variant.data()
        put("gate.min_trials", 2)(data, ctx)
        found = refusals(observe_data(ctx, data, ("gate",)))
        if not any(names(r, "min_trials") and "exploratory" in str(r) for r in found):
            problems.append(f"{variant.id}: gate.min_trials 2 in a non-exploratory matrix is not refused naming "
                            f"min_trials and exploratory: {found or 'accepted'}")
        put("matrix.exploratory", True)(data, ctx)
        if refusals(observe_data(ctx, data, ("gate",))):
            problems.append(f"{variant.id}: gate.min_trials 2 in an exploratory matrix is refused")
    return problems


def exploratory_with_enough_trials(ctx: Ctx) -> list[str]:
    return _refused_or_consumed(ctx, "exploratory", put("matrix.exploratory", True), ("serve", "draft", "gate_on_plan"),
                                base=put("matrix.cells.*.trials", 3))


def training_input_hash_checks(ctx: Ctx) -> list[str]:
    """A corpus from another run's traffic is refused as training input with both hashes; one built from
    this run's own profile (another run, another seed) is accepted and trained on."""
    from contracts.events import TrainingRequested
    from services.runtime.errors import SpecdecError
    from services.trainer_proxy.planning.staging import plan_training
    from tests.unit.guard.runs import THIRD_RUN, runs

    built = runs(ctx)
    problems = []
    hashes = {run: built.ref(run, layout.PROFILE).sha256 for run in (RUN, OTHER_RUN)}
    outcomes: dict[str, Any] = {}
    for source in (RUN, OTHER_RUN, THIRD_RUN):
        bundle = built.copy_of(ctx)
        event = TrainingRequested(run_id=RUN, producer="guard", requested_by="guard",
                                  inputs={"corpus": bundle.ref(source, layout.CORPUS)})
        try:
            plan, _ = plan_training(bundle, built.campaign, event)
            outcomes[source] = plan.inputs.corpus_train.sha256
        except SpecdecError as exc:
            outcomes[source] = Refused(type(exc).__name__, str(exc))
    other = outcomes[OTHER_RUN]
    if not isinstance(other, Refused):
        problems.append(f"a corpus of {OTHER_RUN} (other traffic, other profile) was accepted as training input")
    elif not all(h in other.message for h in hashes.values()):
        problems.append(f"the refusal does not give both profile hashes {sorted(hashes.values())}: {other.message}")
    for source in (RUN, THIRD_RUN):
        if isinstance(outcomes[source], Refused):
            problems.append(f"a corpus built from this run's own profile ({source}) was refused: {outcomes[source]}")
    if outcomes[RUN] == outcomes[THIRD_RUN]:
        problems.append("the corpus input changed nothing the trainer is given")
    return problems


def latency_only_gate_objective(ctx: Ctx) -> list[str]:
    problems = []
    for objective in ("output_throughput", "acceptance_rate", "acceptance_length"):
        data = VARIANTS[0].data()
        data["gate"]["objective"] = objective
        found = submitted(ctx, data)
        if not (isinstance(found, Refused) and "gate.objective" in found.message):
            problems.append(f"gate.objective {objective!r} must be refused at submit naming gate.objective: {found}")
    for objective in ("ttft", "tpot:p99", "itl:mean", "e2el:median"):
        data = VARIANTS[0].data()
        data["gate"]["objective"] = objective
        if isinstance(submitted(ctx, data), Refused):
            problems.append(f"the latency objective {objective!r} is refused")
    return problems


def gate_guards(ctx: Ctx) -> list[str]:
    from tests.unit.guard.fields import campaign_fields

    if "gate.guards" not in campaign_fields():
        return ["the campaign has no gate.guards"]
    problems = _judged(ctx, "gate.guards", CHECKS["gate.guards"], VARIANTS)
    for variant in VARIANTS:
        items = {f: c for f, c in item_checks(variant).items() if f.startswith("gate.guards[")}
        problems += [p for f, c in items.items() for p in _judged(ctx, f, c, [variant])]
    return problems


def node_in_the_trial_identity(ctx: Ctx) -> list[str]:
    """Trials of the baseline served on one node and of the candidates on another: the gate refuses
    what it decides on one node."""
    from services.gate import decide

    problems = []
    for variant in VARIANTS:
        here = variant.data()
        there = variant.data()
        put("matrix.cells.*.node", "node-b")(there, ctx)
        plans = [bench_plan(ctx, submitted(ctx, d)) for d in (here, there)]  # type: ignore[arg-type]  # both submit
        if any(isinstance(p, Refused) for p in plans):
            problems.append(f"{variant.id}: a bench plan is refused: {plans}")
            continue
        arms_here, arms_there = (plan_trials(p) for p in plans)
        standing = baseline_of(plans[0])
        base = arms_here.pop(standing)
        arms_there.pop(standing)
        gate = submitted(ctx, here).gate  # type: ignore[union-attr]  # it submitted: its bench plan exists
        same = _decision(decide(base, arms_here, gate))
        mixed = _decision(decide(base, arms_there, gate))
        if same == mixed:
            problems.append(f"{variant.id}: arms measured on node-a and node-b are decided as if on one node: {mixed}")
        if "promote" == mixed["decision"]:
            problems.append(f"{variant.id}: a comparison across nodes promotes: {mixed}")
    return problems


ITEMS: dict[str, Case] = {
    "every listed shape benched": every_listed_shape_benched,
    "workload_shape tied to the prompt source": workload_shape_tied_to_the_prompt_source,
    "unknown --input names refused": unknown_input_names_refused,
    "Kubernetes templates refused on other schedulers": kubernetes_templates_refused_on_other_schedulers,
    "relative paths in matrix.path resolved": relative_paths_in_matrix_path_resolved,
    "burstiness without request_rate consumed or refused": burstiness_without_request_rate,
    "min_trials: 1 consumed or refused": min_trials_one,
    "min_trials below 3 only in an exploratory matrix": min_trials_below_three_only_exploratory,
    "exploratory consumed or refused": exploratory_with_enough_trials,
    "training-input hash checks": training_input_hash_checks,
    "latency-only gate objective": latency_only_gate_objective,
    "gate.guards": gate_guards,
    "node in the trial identity": node_in_the_trial_identity,
}
