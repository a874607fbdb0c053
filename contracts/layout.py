"""The evidence bundle's layout: every path a step writes, or reads from another step.

One module names them all, so a step reads what an upstream step wrote only
through these names (docs/design.md#the-evidence-bundle), and a reader of the bundle
finds each file here. Paths are relative to a run's bundle folder; the store
(`services/runtime/bundle/bundle.py`) validates each one before any I/O. Functions
build the paths that carry IDs (cells, trials, launches); they take validated
IDs (`contracts.envelope.Key`) and never touch the disk.

Sections follow the flow: what `specdec submit` stores, then each step's folder.
"""

from __future__ import annotations

# --- owned by the store ---------------------------------------------------------
EVENTS = "events.jsonl"  # append-only; the journal is its one writer
EVENTS_TORN = "events.torn.jsonl"  # lines torn mid-append, kept aside (services/runtime/bundle/bundle_events.py)
MANIFEST = "manifest.json"  # derived from the artifacts, rebuilt atomically
INDEX_DIR = ".index"  # the store's per-artifact hash records
# The journal's records of events Redis lost before it read them (services/runtime/bundle/gaps.py);
# the manifest's lost_events derive from them.
GAPS_DIR = "journal/gaps"
# Events recorded whole by their producer before it publishes them (services/runtime/bundle/outbox.py), and
# the journal's records of the known events it published again (services/runtime/bundle/repair.py).
EMITTED_DIR = "journal/emitted"
REPAIRS_DIR = "journal/repairs"

# --- stored by `specdec submit`, before anything runs ----------------------------
CAMPAIGN_YAML = "campaign.yaml"  # the operator's file, byte for byte
CAMPAIGN = "campaign.json"  # the validated, resolved campaign every step reads
OPERATOR_COMMANDS = "operator/commands.json"
OPERATOR_REVISIONS = "operator/source_revisions.json"
# The target checkpoint's build record (its source, hashes and conversion versions), copied
# at submit when the checkpoint folder carries one (infra/examples/smollm2.py writes it).
TARGET_BUILD = "operator/target-build.json"
TARGET_BUILD_FILE = "specdec-build.json"  # the record's name inside a checkpoint folder
CANONICAL = "canonical.json"  # what a canonical matrix file said beyond the campaign (contracts/campaign/canonical.py)
INERT = "inert.json"  # fields accepted but not consumed (contracts/inert.py)
INTENT = "intent.json"  # what the campaign is for, as evidence_init was told (the workflow's --intent)
WORKFLOW = "workflow"  # the workflow tools' own records


def workflow_dry_run(n: int) -> str:
    """The plan hashes the n-th perf_tune_report_campaign_run dry run returned (n from 1)."""
    return f"{WORKFLOW}/dry-run-{n}.json"


# --- profile/ --------------------------------------------------------------------
PROFILE_DIR = "profile"
PROFILE = f"{PROFILE_DIR}/PROFILE.json"
PROFILE_REJECTED = f"{PROFILE_DIR}/PROFILE.rejected.json"  # kept when too many lines were rejected
# Suffix acceptance predicted offline (contracts/artifacts/suffix.py).
PROFILE_SUFFIX = f"{PROFILE_DIR}/SUFFIX_PREDICTION.json"

# --- corpus/ ---------------------------------------------------------------------
CORPUS_DIR = "corpus"
CORPUS = f"{CORPUS_DIR}/CORPUS.jsonl"
CORPUS_MANIFEST = f"{CORPUS}.manifest.json"


def corpus_split(name: str) -> str:
    """One split of the corpus as its own file (`train`, `heldout`)."""
    return f"{CORPUS_DIR}/{name}.jsonl"


# --- capacity/ -------------------------------------------------------------------
CAPACITY_DIR = "capacity"


def capacity_check(folder: str, check_id: str) -> str:
    """One idle check's folder under `folder` (the capacity step's, or a re-check's)."""
    return f"{folder}/{check_id}"


def capacity_snapshot(check: str) -> str:
    """The snapshot of one idle check; `check` is a `capacity_check` folder."""
    return f"{check}/snapshot.json"


def capacity_raw(check: str, number: int, name: str, stream: str) -> str:
    """One raw output of an idle check, as read: `stream` is `stdout` or `stderr`."""
    return f"{check}/raw/{number:02d}-{name}.{stream}"


# --- training/ -------------------------------------------------------------------
TRAINING_DIR = "training"
TRAINING_PLAN = f"{TRAINING_DIR}/plan.json"
TRAINING_SKIPPED = f"{TRAINING_DIR}/skipped.json"
TRAINING_CORPUS_TRAIN = f"{TRAINING_DIR}/corpus-train.jsonl"
TRAINING_CORPUS_HELDOUT = f"{TRAINING_DIR}/corpus-heldout.jsonl"
TRAINING_OUTPUT_DIR = f"{TRAINING_DIR}/output"  # the draft checkpoint the trainer writes
TRAINING_STDOUT = f"{TRAINING_DIR}/stdout.log"
TRAINING_STDERR = f"{TRAINING_DIR}/stderr.log"
TRAINING_ARGV = f"{TRAINING_DIR}/argv.json"
TRAINING_OUTPUTS = f"{TRAINING_DIR}/outputs.json"  # every output file and its sha256
TRAINING_CAPTURE = f"{TRAINING_DIR}/capture.json"
TRAINING_CLEANUP = f"{TRAINING_DIR}/cleanup.json"
TRAINING_PROBES = f"{TRAINING_DIR}/probes.json"
TRAINING_DRAFT_COST = f"{TRAINING_DIR}/draft-cost.json"  # the draft's per-token cost against the target's
TRAINING_PROBE_STDOUT = f"{TRAINING_DIR}/probe/stdout.log"
TRAINING_PROBE_STDERR = f"{TRAINING_DIR}/probe/stderr.log"
TRAINING_INPUT_KEY = f"{TRAINING_DIR}/input-key.json"
TRAINING_REUSE = f"{TRAINING_DIR}/reuse.json"
TRAINING_SLURM_JOB = f"{TRAINING_DIR}/slurm-job.py"
TRAINING_K8S_JOB = f"{TRAINING_DIR}/job.json"
TRAINING_RECHECK_DIR = f"{TRAINING_DIR}/capacity"  # the pre-launch capacity re-check
TRAINING_KEEPER = f"{TRAINING_DIR}/keeper.json"  # the local trainer's and its keeper's pids and start times
TRAINING_EXIT = f"{TRAINING_DIR}/exit.json"  # how the local trainer ended, recorded by its keeper
TRAINING_SLURM_JOB_ID = f"{TRAINING_DIR}/slurm-job-id.json"  # the submitted job's ID, for a restarted service

# --- bench/ ----------------------------------------------------------------------
BENCH_DIR = "bench"
BENCH_PLAN = f"{BENCH_DIR}/plan.json"
BENCH_PROMPTS = f"{BENCH_DIR}/prompts.jsonl"
BENCH_RECHECK_DIR = f"{BENCH_DIR}/capacity"
BENCH_ATTEMPTS_DIR = f"{BENCH_DIR}/attempts"
BENCH_ROUNDS_DIR = f"{BENCH_DIR}/rounds"  # sequential rounds: look-<n>.json, one per look
# Inside a launch folder (the server's log, the Slurm job, the Kubernetes Pod).
SERVER_LOG = "server.log"
SLURM_SERVE_JOB = "serve-job.py"
SLURM_ENDPOINT = "endpoint.json"
K8S_POD = "pod.json"
# The trial results the gate and the publisher read; nothing else matches it.
RESULTS_GLOB = f"{BENCH_DIR}/*/trial-*/result-*.json"


def bench_takeback(attempt: int | str) -> str:
    """What an attempt ended before its first launch: the servers an earlier owner of the run left."""
    return f"{BENCH_ATTEMPTS_DIR}/takeback-{attempt}.json"


def bench_attempt(attempt: int | str) -> str:
    """The record of one execution of the bench plan ("*" globs them all)."""
    return f"{BENCH_ATTEMPTS_DIR}/attempt-{attempt}.json"


def launch_folder(cell_id: str, index: int | str) -> str:
    """Where one server launch of a cell keeps its log, argv and engine files."""
    return f"{BENCH_DIR}/{cell_id}/launch-{index}"


def engine_check(launch_dir: str) -> str:
    """A launch's read-back of the engine's effective config (contracts/artifacts/engine.py)."""
    return f"{launch_dir}/engine-config.json"


def trial_folder(cell_id: str, trial: int | str) -> str:
    return f"{BENCH_DIR}/{cell_id}/trial-{trial}"


def attempt_folder(folder: str, attempt: int | str) -> str:
    """A later attempt's raw files inside `folder`; the first attempt writes in `folder` itself."""
    return folder if attempt == 1 else f"{folder}/attempt-{attempt}"


def result_name(concurrency: int | str) -> str:
    return f"result-c{concurrency}.json"


def trial_result(cell_id: str, trial: int | str, concurrency: int | str) -> str:
    """One trial's result JSON (`vllm bench serve` keys plus specdec's blocks); "*" parts make a glob."""
    return f"{trial_folder(cell_id, trial)}/{result_name(concurrency)}"


def operator_result(folder: str, concurrency: int) -> str:
    """The raw file an operator's bench command wrote, before specdec adds its blocks."""
    return f"{folder}/operator-result-c{concurrency}.json"


def rejected_result(cell_id: str, trial: int | str, concurrency: int | str) -> str:
    """A trial the bench rejected (its spec-decode counters contradict the declared speculation,
    contracts/artifacts/speculation.py): the whole result plus `speculation_problems`, kept as evidence under
    a name RESULTS_GLOB does not match, so no gate or report counts it; "*" parts make a glob."""
    return f"{trial_folder(cell_id, trial)}/rejected-c{concurrency}.json"


# Every rejected trial of a run; disjoint from RESULTS_GLOB.
REJECTED_GLOB = rejected_result("*", "*", "*")
# Every launch's engine read-back: the first attempt's, then a later attempt's (attempt_folder).
ENGINE_CHECK_GLOBS = (engine_check(launch_folder("*", "*")),
                      engine_check(attempt_folder(launch_folder("*", "*"), "*")))


# --- gate/ -----------------------------------------------------------------------
GATE_DIR = "gate"
DECISION = f"{GATE_DIR}/DECISION.json"

# --- report/ ---------------------------------------------------------------------
REPORT_DIR = "report"
REPORT_MARKDOWN = f"{REPORT_DIR}/report.md"
REPORT_HTML = f"{REPORT_DIR}/report.html"
REPORT_SUMMARY = f"{REPORT_DIR}/report.json"
REPORT_PLOTS_DIR = f"{REPORT_DIR}/plots"


def report_plot(name: str) -> str:
    """One plot of the report by its file name, e.g. `speedup.png`."""
    return f"{REPORT_PLOTS_DIR}/{name}"


# --- publish/ --------------------------------------------------------------------
PUBLISH_DIR = "publish"
# Sent next to the report's files (name, sha256, size of each); a folder target
# inside the bundle (`file://DIR`) stores it as `DIR/manifest.json`.
PUBLISHED_MANIFEST = "manifest.json"


def publication(key: str) -> str:
    """The record of one publish request (`key`: the request's), what was or would be sent."""
    return f"{PUBLISH_DIR}/{key}/publication.json"


def publication_response(key: str) -> str:
    """Every HTTP attempt of one publish request, with the target's answers."""
    return f"{PUBLISH_DIR}/{key}/response.json"


# Where the services that change the cluster store their plan: an approval names
# the sha256 of these files, and `specdec <step> plan` prints them.
PLAN_PATHS: dict[str, str] = {"training": TRAINING_PLAN, "bench": BENCH_PLAN}
