"""The bench plan's staging: `plan_bench`, the trigger's handler, reads the matrix, the prompts and
the placement and stores the prompts and the plan builder.py builds, write-once and hashed. Its inputs
come from the trigger event (`training.completed`: the draft, the node, the corpus), a request's named
inputs, or the run's bundle and journal (services/runtime/delivery/upstream.py). Nothing here starts a
process.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign, Matrix, TrafficFile
from contracts.campaign.canonical import CanonicalRecord
from contracts.envelope import ArtifactRef, Event
from contracts.events import CapacitySelected, TrainingCompleted
from contracts.inputs import CORPUS, TRAINING_OUTPUT
from services.bench.loadgen.prompts import (
    Prompt,
    ShapeSpec,
    cycle,
    heldout_prompts,
    mixed_shape_prompts,
    shape_shares,
    source_label,
)
from services.bench.planning.builder import build_plan
from services.bench.planning.model import BenchPlan
from services.bench.planning.rounds import earlier_noise
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore, InvalidPath
from services.runtime.delivery.upstream import latest
from services.runtime.errors import StepFailed, invalid_input, parse_error_at
from services.runtime.target import tokenizer_folder
from services.shared.text.shapes import resolve


def load_matrix(campaign: Campaign) -> Matrix:
    """The campaign's matrix (inline, or read from matrix.path) with the load's traffic-dependent
    default decided (matrix.load.ignore_eos), so the plan, the prompts and an operator bench agree."""
    if isinstance(campaign.matrix, Matrix):
        return campaign.matrix.for_traffic(shapes=campaign.shapes_only)
    path = Path(campaign.matrix.path)
    # Never the file's text in the message (it may hold a password): where it failed, and why.
    try:
        matrix = Matrix.model_validate(yaml.safe_load(path.read_text()))
    except OSError as exc:
        raise StepFailed(f"cannot read matrix.path {path}: {exc.strerror}", error_type="MatrixUnusable") from None
    except yaml.YAMLError as exc:
        raise StepFailed(
            f"matrix.path is not valid YAML: {parse_error_at(path, exc)}", error_type="MatrixUnusable"
        ) from None
    except ValidationError as exc:
        raise StepFailed(f"cannot use matrix.path {path}: {invalid_input(exc)}", error_type="MatrixUnusable") from None
    return matrix.for_traffic(shapes=campaign.shapes_only)


def _request_input(event: Event, name: str) -> ArtifactRef | None:
    return getattr(event, "inputs", {}).get(name)


def training_output(bundle: BundleStore, event: Event) -> str | None:
    """The trained draft's directory: from training.completed, a request's input, or the run's journal."""
    if isinstance(event, TrainingCompleted):
        return event.checkpoint_dir
    ref = _request_input(event, TRAINING_OUTPUT)
    if ref is not None:
        path = bundle.resolve(ref.uri)
        return str(path if path.is_dir() else path.parent)
    completed = latest(bundle, event.run_id, TrainingCompleted)
    return completed.checkpoint_dir if completed is not None else None


def _corpus_ref(bundle: BundleStore, event: Event) -> ArtifactRef:
    """The corpus whose heldout split is measured: the event's, a request's input, else the run's own."""
    ref = event.corpus if isinstance(event, TrainingCompleted) else _request_input(event, CORPUS)
    if ref is not None:
        return ref
    try:
        return bundle.ref(event.run_id, layout.CORPUS)
    except (ArtifactMissing, InvalidPath):
        raise StepFailed("no corpus in the bundle: the bench measures the corpus's heldout split; "
                         "run the corpus step first", error_type="NoCorpus") from None


def shape_specs(campaign: Campaign, matrix: Matrix) -> list[ShapeSpec]:
    """Every listed shape as it is sent (none for traffic: its prompts are the heldout
    split): its input length within half the target's context (so the output fits),
    its output length matrix.load.max_output_tokens when set."""
    if isinstance(campaign.traffic, TrafficFile):
        return []
    cap = campaign.target.max_model_len // 2
    return [ShapeSpec(name=shape.name, input_tokens=min(shape.input_tokens, cap),
                      output_tokens=matrix.load.max_output_tokens or shape.output_tokens)
            for shape in resolve(campaign.traffic.shapes)]


def build_prompts(bundle: BundleStore, campaign: Campaign, matrix: Matrix, event: Event) -> list[Prompt]:
    return _prompts(bundle, campaign, matrix, event)[0]


def _prompts(
    bundle: BundleStore, campaign: Campaign, matrix: Matrix, event: Event
) -> tuple[list[Prompt], dict[str, Any]]:
    """The window's prompts and where they came from, in the plan's words."""
    load = matrix.load
    tokenizer = tokenizer_folder(campaign)
    label = source_label(campaign.traffic)
    if isinstance(campaign.traffic, TrafficFile):
        corpus = _corpus_ref(bundle, event)
        prompts = heldout_prompts(bundle.resolve(corpus.uri), limit=load.num_prompts, tokenizer_dir=tokenizer,
                                  max_output_tokens=load.max_output_tokens, ignore_eos=load.ignore_eos)
        source = {
            "origin": "corpus-heldout",
            "workload_shape": label,
            "corpus": {"uri": corpus.uri, "sha256": corpus.sha256},
            "distinct_prompts": len(prompts),
            "order": "heldout records in file order, reused from the first when fewer than num_prompts",
        }
        return cycle(prompts, load.num_prompts), source
    specs = shape_specs(campaign, matrix)
    declared = {shape.name: shape for shape in resolve(campaign.traffic.shapes)}  # before the cap
    shares = shape_shares(load.num_prompts, len(specs))
    source = {
        "origin": "shapes", "workload_shape": label,
        "shapes": [{"name": spec.name, "prompts": share, "input_tokens": spec.input_tokens,
                    "output_tokens": spec.output_tokens, "declared_input_tokens": declared[spec.name].input_tokens,
                    "declared_output_tokens": declared[spec.name].output_tokens}
                   for spec, share in zip(specs, shares, strict=True)],
        "order": "the shapes in turn, in the order listed: prompt i from shape i mod n",
    }
    return mixed_shape_prompts(specs, load.num_prompts, tokenizer_dir=tokenizer, ignore_eos=load.ignore_eos), source


def _selected_node(bundle: BundleStore, event: Event) -> str | None:
    """The capacity step's selection: carried by training.completed, else the run's latest capacity.selected."""
    if isinstance(event, TrainingCompleted) and event.node:
        return event.node
    selected = latest(bundle, event.run_id, CapacitySelected)
    return selected.node if selected is not None and selected.node else None


def default_node(bundle: BundleStore, campaign: Campaign, matrix: Matrix, event: Event) -> str:
    """Where cells without a node are served: this host for the local executor; on a
    scheduler, the capacity step's selection. This host is no scheduler node, so
    without a selection every cell must name its node."""
    if campaign.capacity.scheduler == "local":
        return socket.gethostname()
    node = _selected_node(bundle, event)
    if node is not None:
        return node
    unplaced = [cell.cell_id for cell in matrix.cells if not cell.node]
    if unplaced:
        run_id = event.run_id
        raise StepFailed(
            f"run {run_id} has no capacity.selected in its journal, so no idle {campaign.capacity.scheduler} node is "
            f"known for cells {unplaced}: run the capacity step first (specdec request capacity {run_id}) or give "
            "each cell its node", error_type="NoCapacity")
    return ""  # every cell names its node


def _canonical(bundle: BundleStore, run_id: str) -> CanonicalRecord | None:
    """The run's canonical matrix record (stored at submit), or None for a campaign in specdec's shape."""
    try:
        return CanonicalRecord.model_validate(bundle.read_json(run_id, layout.CANONICAL))
    except ArtifactMissing:
        return None


def plan_bench(bundle: BundleStore, campaign: Campaign, event: Event) -> tuple[BenchPlan, ArtifactRef]:
    """Store the prompts and the plan; the plan and its ref (raises StepFailed on a bad input)."""
    run_id = event.run_id
    matrix = load_matrix(campaign)
    prompts, source = _prompts(bundle, campaign, matrix, event)
    prompts_ref = bundle.write_bytes(run_id, layout.BENCH_PROMPTS,
                                     b"".join(p.model_dump_json().encode() + b"\n" for p in prompts))
    plan = build_plan(
        campaign, matrix, run_id=run_id, default_node=default_node(bundle, campaign, matrix, event),
        canonical=_canonical(bundle, run_id),
        training_output=training_output(bundle, event),
        prompts={"source": layout.BENCH_PROMPTS, "uri": prompts_ref.uri, "sha256": prompts_ref.sha256,
                 "count": len(prompts), **source},
        run_dir=str(bundle.run_dir(run_id).absolute()), cwd=str(Path.cwd()),
        # Sequential rounds: the noise earlier runs of the same target and hardware recorded, for the
        # expected trials per arm the plan states before approval.
        noise=earlier_noise(bundle, campaign, matrix, run_id) if campaign.gate.max_trials is not None else None,
    )
    return plan, bundle.write_json(run_id, layout.BENCH_PLAN, plan)
