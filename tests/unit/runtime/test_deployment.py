"""The deployment files agree with the service catalogue (checked statically here;
`make test-compose` runs compose.yaml for real, tests/compose).

compose.yaml, infra/k8s (both variants) and infra/Dockerfile are parsed and
checked against `services.runtime.apps.available()`: every built service runs
`python -m services.runtime.main <name>` with its settings (Redis URL naming
the Redis service, stream prefix, bundle root on the bundles volume, health
port probed), after a healthy Redis with AOF on. Each checker returns the
problems it finds, so the negative tests can show that a missing entry or a
broken dependency is caught. The Slurm templates are rendered and executed.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import redis
import yaml
from pydantic import ValidationError

from contracts.argv import ArgvError, render_token
from contracts.envelope import RUN_ID_RE
from services.runtime import apps
from services.runtime.processes.procs import EXPERIMENT_ENV, SERVICE_ENV
from services.runtime.settings import RuntimeSettings
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "infra" / "k8s"
VARIANTS = {"gpu": K8S, "cpu": K8S / "cpu"}
PART_OF = "app.kubernetes.io/part-of"
GPU_SERVICE = "bench-runner"
# Keys of a compose service this file may use (a typo such as `depend_on` is an error).
COMPOSE_KEYS = {
    "image", "build", "command", "entrypoint", "environment", "volumes", "depends_on", "healthcheck", "restart",
    "stop_grace_period", "profiles", "deploy", "shm_size", "ports", "user",
}
# Where the services' Redis URL comes from: a file (SPECDEC_REDIS_URL_FILE) in the folder that
# the credentials are mounted at, never a URL in clear in the topology's files.
REDIS_USERS_DIR = "/usr/local/etc/redis/users"
COMPOSE_URL_SOURCE = "redis-users"
K8S_URL_SOURCE = "secret:specdec-redis-services"


def command_of(name: str) -> list[str]:
    return ["python", "-m", "services.runtime.main", name]


def interpolate(value: str) -> str:
    """Compose's `${VAR:-default}` / `${VAR-default}` / `${VAR}`, with nothing set: the default."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}", lambda m: m.group(1) or "", str(value))


def settings_problems(where: str, env: dict[str, str]) -> list[str]:
    """Every SPECDEC_* variable is a RuntimeSettings field with a valid value."""
    values: dict[str, Any] = {key.removeprefix("SPECDEC_").lower(): val for key, val in env.items()
                              if key.startswith("SPECDEC_")}
    values.pop("redis_url_file", None)  # the file exists in the container only (checked by service_env_problems)
    try:
        RuntimeSettings(**values)
    except ValidationError as exc:
        return [f"{where}: its SPECDEC_* settings do not validate: {exc}"]
    return []


def service_env_problems(where: str, env: dict[str, str], mounts: dict[str, str], url_source: str) -> list[str]:
    """`url_source`: the volume (or secret:NAME) the services' Redis URL file must be mounted from."""
    problems = settings_problems(where, env)
    if "SPECDEC_REDIS_URL" in env:
        problems.append(f"{where}: SPECDEC_REDIS_URL={env['SPECDEC_REDIS_URL']!r} is set; the services' Redis URL "
                        "carries a password and comes from SPECDEC_REDIS_URL_FILE, a mounted secret")
    url_file = env.get("SPECDEC_REDIS_URL_FILE", "")
    if not url_file or mounts.get(str(PurePosixPath(url_file).parent)) != url_source:
        problems.append(f"{where}: SPECDEC_REDIS_URL_FILE={url_file!r} is not in the mounted {url_source} ({mounts})")
    if not env.get("SPECDEC_STREAM_PREFIX"):
        problems.append(f"{where}: SPECDEC_STREAM_PREFIX is not set")
    root = env.get("SPECDEC_BUNDLE_ROOT")
    if root is None or mounts.get(root) != "bundles":
        problems.append(f"{where}: SPECDEC_BUNDLE_ROOT={root!r} is not where the bundles volume is mounted ({mounts})")
    if "models" not in mounts.values():
        problems.append(f"{where}: the models volume is not mounted")
    return problems


# --- compose ------------------------------------------------------------------------


def load_compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def compose_problems(compose: dict[str, Any], names: list[str]) -> list[str]:
    services = compose["services"]
    problems = []
    redis_names = {key for key, svc in services.items()
                   if str(svc.get("image", "")).startswith("redis:") and "redis-server" in (svc.get("command") or [])}
    problems += compose_redis_problems(services, redis_names)
    running: dict[str, list[str]] = {}
    for key, svc in services.items():
        for unknown in sorted(set(svc) - COMPOSE_KEYS):
            problems.append(f"compose {key}: unknown key {unknown!r}")
        cmd = svc.get("command")
        if key != "redis-credentials" and "user" in svc:
            problems.append(f"compose {key}: `user` replaces the image's user")
        if isinstance(cmd, list) and cmd[:3] == command_of("")[:3]:
            running.setdefault(cmd[3], []).append(key)
    for name in names:
        if name not in running:
            problems.append(f"compose: no service runs {' '.join(command_of(name))}")
    for name, keys in running.items():
        if name not in names:
            problems.append(f"compose {keys}: runs {name!r}, which is not a built service")
        for key in keys:
            problems += compose_service_problems(key, services[key], compose.get("volumes") or {})
        unprofiled = [key for key in keys if not services[key].get("profiles")]
        if name != GPU_SERVICE and len(unprofiled) != 1:
            problems.append(f"compose: {name} should run in exactly one always-on service, not {unprofiled}")
    problems += compose_bench_problems(services, running.get(GPU_SERVICE, []))
    return problems


def compose_redis_problems(services: dict[str, Any], redis_names: set[str]) -> list[str]:
    problems = compose_credentials_problems(services)
    if redis_names != {"redis"}:
        return [*problems, f"compose: expected one Redis service named redis, found {sorted(redis_names)}"]
    redis_svc = services["redis"]
    if f"{COMPOSE_URL_SOURCE}:{REDIS_USERS_DIR}:ro" not in redis_svc.get("volumes", []):
        problems.append(f"compose redis: the {COMPOSE_URL_SOURCE} volume is not mounted read-only at {REDIS_USERS_DIR}")
    if (redis_svc.get("depends_on") or {}).get("redis-credentials", {}).get(
        "condition"
    ) != "service_completed_successfully":
        problems.append(
            "compose redis: does not wait for redis-credentials (condition: service_completed_successfully)"
        )
    conf_mounts = [v.split(":")[0] for v in redis_svc.get("volumes", []) if v.endswith("redis.conf:ro")]
    if conf_mounts != ["./infra/redis.conf"] or not any("redis.conf" in part for part in redis_svc.get("command", [])):
        problems.append("compose redis: does not run with ./infra/redis.conf")
    problems += [f"compose redis: {p}" for p in redis_conf_problems((ROOT / "infra/redis.conf").read_text())]
    test = " ".join(redis_svc.get("healthcheck", {}).get("test", []))
    if "ping" not in test.lower() or "REDISCLI_AUTH=" not in test or "--user specdec-health" not in test:
        problems.append("compose redis: no healthcheck that PINGs it as specdec-health (password from REDISCLI_AUTH)")
    return problems


def compose_credentials_problems(services: dict[str, Any]) -> list[str]:
    """The redis-credentials step: infra/bin/redis-credentials into the redis-users volume, as root."""
    step = services.get("redis-credentials") or {}
    entry = step.get("entrypoint") or []
    mounts = step.get("volumes") or []
    if (step.get("image") != services.get("redis", {}).get("image") or str(step.get("user")) != "0"
            or entry[:2] != ["sh", "/usr/local/bin/redis-credentials"] or entry[-2:] != ["redis", "6379"]
            or "./infra/bin/redis-credentials:/usr/local/bin/redis-credentials:ro" not in mounts
            or f"{COMPOSE_URL_SOURCE}:{entry[-3] if len(entry) > 2 else ''}" not in mounts):
        return ["compose: no redis-credentials step that runs infra/bin/redis-credentials as root into the "
                f"{COMPOSE_URL_SOURCE} volume for redis:6379"]
    return []


def compose_service_problems(
    key: str, svc: dict[str, Any], volumes: dict[str, Any]
) -> list[str]:
    env = {k: interpolate(v) for k, v in (svc.get("environment") or {}).items()}
    mounts = {}
    for spec in svc.get("volumes", []):
        source, target = spec.split(":")[:2]
        if source in volumes:
            mounts[target] = source
    problems = service_env_problems(f"compose {key}", env, mounts, COMPOSE_URL_SOURCE)
    if (svc.get("depends_on") or {}).get("redis", {}).get("condition") != "service_healthy":
        problems.append(f"compose {key}: does not depend on a healthy redis (condition: service_healthy)")
    check = svc.get("healthcheck", {}).get("test", [])
    port = env.get("SPECDEC_HEALTH_PORT")
    if check[:4] != ["CMD", "python", "-m", "services.runtime.health.healthcheck"] or port not in check:
        problems.append(f"compose {key}: healthcheck {check} does not probe the health port {port}")
    build = svc.get("build") or {}
    if build.get("dockerfile") != "infra/Dockerfile" or "EXTRAS" not in (build.get("args") or {}):
        problems.append(f"compose {key}: not built from infra/Dockerfile with an EXTRAS build arg")
    return problems


def extras(svc: dict[str, Any]) -> set[str]:
    return set(str(svc.get("build", {}).get("args", {}).get("EXTRAS", "")).split(","))


def compose_bench_problems(services: dict[str, Any], keys: list[str]) -> list[str]:
    gpu: list[str] = []
    cpu: list[str] = []
    for key in keys:
        devices = services[key].get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
        nvidia = [d for d in devices if d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", [])]
        (gpu if nvidia else cpu).append(key)
    problems = []
    if len(gpu) != 1 or "gpu" not in extras(services[gpu[0]]):
        problems.append(f"compose: need one bench-runner with an nvidia GPU reservation built with EXTRAS gpu ({gpu})")
    if len(cpu) != 1 or "cpu" not in extras(services[cpu[0]]) or services[cpu[0]].get("profiles") != ["cpu"]:
        problems.append(f"compose: need one CPU bench-runner (profile cpu, EXTRAS with cpu), found {cpu}")
    return problems


def redis_conf_problems(text: str) -> list[str]:
    directives = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            directives[parts[0].lower()] = " ".join(parts[1:]).strip('"')
    problems = []
    if directives.get("appendonly") != "yes":
        problems.append("redis.conf: appendonly is not yes")
    if directives.get("appendfsync") not in ("everysec", "always"):
        problems.append(f"redis.conf: appendfsync is {directives.get('appendfsync')!r}, not everysec or always")
    if directives.get("maxmemory-policy") != "noeviction":
        problems.append("redis.conf: streams could be evicted (maxmemory-policy is not noeviction)")
    if directives.get("protected-mode") != "yes":
        problems.append("redis.conf: protected-mode is not yes")
    if directives.get("aclfile") != f"{REDIS_USERS_DIR}/users.acl":
        problems.append(f"redis.conf: its users are not those of {REDIS_USERS_DIR}/users.acl (aclfile)")
    if {"requirepass", "user"} & set(directives):
        problems.append("redis.conf: a password or a user in the file itself (they belong in the ACL file)")
    return problems


# --- kubernetes ---------------------------------------------------------------------


def load_kustomization(directory: Path) -> list[dict[str, Any]]:
    """The objects a kustomization lists, following its resources (files and folders)."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    objects = []
    for resource in spec.get("resources", []):
        path = (directory / resource).resolve()
        if path.is_dir():
            objects += load_kustomization(path)
        else:
            objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return objects


def k8s_problems(objects: list[dict[str, Any]], names: list[str], variant: str) -> list[str]:
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    problems = []
    for obj in objects:
        name = obj["metadata"]["name"]
        by_kind.setdefault(obj["kind"], {})[name] = obj
        if obj["metadata"].get("labels", {}).get(PART_OF) != "specdec":
            problems.append(f"k8s {obj['kind']}/{name}: not labelled {PART_OF}: specdec")
    config = {}
    for cm in by_kind.get("ConfigMap", {}).values():
        config[cm["metadata"]["name"]] = cm.get("data", {})
    redis_pods = [s for s in by_kind.get("StatefulSet", {}).values() if "redis" in s["metadata"]["name"]]
    redis_hosts = {
        svc["metadata"]["name"]
        for svc in by_kind.get("Service", {}).values()
        for pod in redis_pods
        if svc["spec"]["selector"].items() <= pod["spec"]["template"]["metadata"]["labels"].items()
    }
    if not redis_hosts:
        problems.append("k8s: no Service selects the Redis StatefulSet")
    if config.get("redis-conf", {}).get("redis.conf") != (ROOT / "infra/redis.conf").read_text():
        problems.append("k8s: ConfigMap redis-conf differs from infra/redis.conf")
    for pod in redis_pods:
        spec = pod["spec"]["template"]["spec"]
        secrets = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
        mounted = {
            m["mountPath"]: secrets.get(m["name"]) for c in spec["containers"] for m in c.get("volumeMounts", [])
        }
        if mounted.get(REDIS_USERS_DIR) != "specdec-redis-users":
            problems.append(f"k8s StatefulSet/{pod['metadata']['name']}: the Secret specdec-redis-users is not "
                            f"mounted at {REDIS_USERS_DIR}")
    running: dict[str, list[dict[str, Any]]] = {}
    for deploy in by_kind.get("Deployment", {}).values():
        for container in deploy["spec"]["template"]["spec"]["containers"]:
            args = container.get("args", [])
            if args[:3] == command_of("")[:3]:
                running.setdefault(args[3], []).append(deploy)
            if "command" in container:
                problems.append(f"k8s {deploy['metadata']['name']}: `command` replaces the image's tini entrypoint")
    for name in names:
        if len(running.get(name, [])) != 1:
            problems.append(f"k8s ({variant}): need one Deployment running {' '.join(command_of(name))}")
    pvcs = set(by_kind.get("PersistentVolumeClaim", {}))
    for name, deploys in running.items():
        if name not in names:
            problems.append(f"k8s: a Deployment runs {name!r}, which is not a built service")
        for deploy in deploys:
            problems += k8s_deployment_problems(deploy, config, pvcs, variant)
    return problems


def k8s_deployment_problems(deploy: dict[str, Any], config: dict[str, dict[str, str]],
                            pvcs: set[str], variant: str) -> list[str]:
    where = f"k8s Deployment/{deploy['metadata']['name']}"
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {}
    for source in container.get("envFrom", []):
        env.update(config.get(source["configMapRef"]["name"], {}))
    env.update({item["name"]: item["value"] for item in container.get("env", []) if "value" in item})
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"].removeprefix("specdec-")
        for v in pod.get("volumes", [])
        if "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] in pvcs
    }
    claims |= {v["name"]: f"secret:{v['secret']['secretName']}" for v in pod.get("volumes", []) if "secret" in v}
    mounts = {m["mountPath"]: claims[m["name"]] for m in container.get("volumeMounts", []) if m["name"] in claims}
    problems = service_env_problems(where, env, mounts, K8S_URL_SOURCE)
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    if not deploy["spec"]["selector"]["matchLabels"].items() <= pod_labels.items():
        problems.append(f"{where}: its selector does not match its pod labels")
    waits = [" ".join(c.get("command", [])) for c in pod.get("initContainers", [])]
    if not any("SPECDEC_REDIS_URL" in w and "ping" in w for w in waits):
        problems.append(f"{where}: no init container waits for Redis to answer PING")
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    probe = container.get("readinessProbe", {}).get("httpGet", {})
    if probe.get("path") != "/health" or str(ports.get(probe.get("port"))) != env.get("SPECDEC_HEALTH_PORT"):
        problems.append(f"{where}: readiness does not GET /health on SPECDEC_HEALTH_PORT")
    gpus = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
    image = container["image"].split(":")[0]
    if container["args"][3] == GPU_SERVICE and variant == "gpu":
        tolerated = any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
        if not gpus or not pod.get("nodeSelector") or not tolerated or image != "specdec-gpu":
            problems.append(f"{where}: not on GPU nodes (nodeSelector, nvidia.com/gpu toleration and limit, gpu image)")
    elif gpus or image != "specdec":
        problems.append(f"{where}: a CPU service asks for a GPU or runs another image than specdec")
    return problems


# --- tests --------------------------------------------------------------------------


def test_compose_agrees_with_the_catalogue() -> None:
    assert apps.available(), "the catalogue lists no built service"
    assert compose_problems(load_compose(), apps.available()) == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_k8s_agrees_with_the_catalogue(variant: str) -> None:
    assert k8s_problems(load_kustomization(VARIANTS[variant]), apps.available(), variant) == []


def test_a_new_service_without_entries_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apps, "SERVICES", (*apps.SERVICES, "tokenizer-cache"))
    monkeypatch.setitem(apps.APP_MODULES, "tokenizer-cache", "services.tokenizer_cache.app")
    names = apps.available()
    assert "tokenizer-cache" in names
    assert compose_problems(load_compose(), names) == [
        "compose: no service runs python -m services.runtime.main tokenizer-cache"
    ]
    for variant, directory in VARIANTS.items():
        assert k8s_problems(load_kustomization(directory), names, variant) == [
            f"k8s ({variant}): need one Deployment running python -m services.runtime.main tokenizer-cache"
        ]


def test_broken_dependencies_are_caught() -> None:
    compose = load_compose()
    broken = copy.deepcopy(compose)
    del broken["services"]["profiler"]["depends_on"]
    broken["services"]["gate"]["environment"]["SPECDEC_REDIS_URL"] = "redis://localhost:6379/0"
    broken["services"]["corpus"]["volumes"] = ["models:/data/models"]
    del broken["services"]["bench-runner"]["deploy"]
    del broken["services"]["redis-credentials"]
    broken["services"]["journal"]["volumes"] = ["bundles:/data/bundles", "models:/data/models"]
    found = "\n".join(compose_problems(broken, apps.available()))
    for expected in ("profiler: does not depend on a healthy redis", "gate: SPECDEC_REDIS_URL",
                     "corpus: SPECDEC_BUNDLE_ROOT", "need one bench-runner with an nvidia GPU reservation",
                     "no redis-credentials step", "journal: SPECDEC_REDIS_URL_FILE"):
        assert expected in found
    objects = copy.deepcopy(load_kustomization(VARIANTS["gpu"]))
    for obj in objects:
        if obj["metadata"]["name"] == "specdec-bench-runner":
            obj["spec"]["template"]["spec"].pop("tolerations")
        if obj["metadata"]["name"] == "specdec-gate":
            obj["metadata"]["labels"].pop(PART_OF)
    found = "\n".join(k8s_problems(objects, apps.available(), "gpu"))
    assert "Deployment/specdec-bench-runner: not on GPU nodes" in found
    assert f"Deployment/specdec-gate: not labelled {PART_OF}" in found
    assert redis_conf_problems("appendonly no\nappendfsync no\n") != []
    open_conf = (ROOT / "infra/redis.conf").read_text().replace("protected-mode yes", "protected-mode no")
    assert redis_conf_problems(open_conf + "requirepass x\n") == [
        "redis.conf: protected-mode is not yes", "redis.conf: a password or a user in the file itself (they belong "
        "in the ACL file)"]


def test_every_topology_setting_is_a_runtime_setting() -> None:
    # An environment variable nothing reads would be inert configuration.
    compose = load_compose()
    env = {k: interpolate(v) for k, v in compose["x-specdec"]["environment"].items()}
    assert settings_problems("compose", env) == []
    assert settings_problems("probe", {"SPECDEC_NOT_A_SETTING": "1"}) != []


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize) is not installed")
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kustomize_renders_the_same_objects(variant: str) -> None:
    out = subprocess.run(["kubectl", "kustomize", str(VARIANTS[variant])], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rendered = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    assert {(o["kind"], o["metadata"]["name"]) for o in rendered} == {
        (o["kind"], o["metadata"]["name"]) for o in load_kustomization(VARIANTS[variant])
    }
    for obj in rendered:
        assert obj["metadata"]["labels"][PART_OF] == "specdec"
        assert obj["kind"] == "Namespace" or obj["metadata"]["namespace"] == "specdec"


def test_dockerfile_builds_one_image_with_extras() -> None:
    text = (ROOT / "infra/Dockerfile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert re.search(r"^ARG EXTRAS=\S+", text, re.MULTILINE)
    assert 'pip install ".[${EXTRAS}]"' in text
    assert re.search(r'^ENTRYPOINT \["tini", "--"\]', text, re.MULTILINE)
    for package in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert f"COPY {package.rstrip('*')} " in text, f"the image lacks the {package} package"
    known = set(pyproject["project"]["optional-dependencies"])
    for key, svc in load_compose()["services"].items():
        if "build" in svc:
            assert extras(svc) <= known, f"compose {key}: unknown extras {extras(svc) - known}"


def test_compose_file_suits_docker_compose_1_29_and_v2() -> None:
    """No top-level `name:` (docker-compose 1.29 rejects it; the project is named with -p or
    COMPOSE_PROJECT_NAME), only keys both read; and 1.29 itself accepts the file where it is installed."""
    compose = load_compose()
    assert {key for key in compose if not key.startswith("x-")} <= {"services", "volumes", "networks"}
    if shutil.which("docker-compose") is None:
        return
    out = subprocess.run(["docker-compose", "-f", str(ROOT / "compose.yaml"), "config", "-q"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr


def test_dockerfile_builds_without_a_registry() -> None:
    """No `# syntax=` frontend to pull; the base image an argument (a locally made one where no registry
    answers); packages in a virtualenv (PEP 668); pip's extra files from the context, empty by default."""
    text = (ROOT / "infra/Dockerfile").read_text()
    assert not re.search(r"^#\s*syntax\s*=", text, re.MULTILINE | re.IGNORECASE)
    assert re.search(r"^ARG BASE_IMAGE=\S+\nFROM \$\{BASE_IMAGE\}$", text, re.MULTILINE)
    assert re.search(r"^RUN python3 -m venv (\S+)$", text, re.MULTILINE)
    assert re.search(r"^ARG PIP_FIND_LINKS=$", text, re.MULTILINE)
    assert re.search(r"^ARG PIP_CA_BUNDLE=$", text, re.MULTILINE)
    assert re.search(r"^ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu$", text, re.MULTILINE)
    folder = re.search(r"^ARG PIP_FILES=(\S+)$", text, re.MULTILINE)
    assert folder and (ROOT / folder.group(1)).is_dir(), "the default PIP_FILES folder must exist for COPY"
    redis_file = (ROOT / "infra/docker/redis.Dockerfile").read_text()
    assert not re.search(r"^#\s*syntax\s*=", redis_file, re.MULTILINE | re.IGNORECASE)
    # The same command and config path as compose.yaml's redis service.
    command = load_compose()["services"]["redis"]["command"]
    assert f"CMD {json.dumps(command)}" in redis_file


def test_redis_conf_is_accepted_by_redis_server(tmp_path: Path) -> None:
    """infra/redis.conf with the ACL file infra/bin/redis-credentials writes: redis-server starts,
    no client gets in without a user, and the durability settings hold. An inspector user, added
    for this test alone, reads the configuration (no specdec user may run CONFIG)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (make test installs it)")
    port = free_port()
    users = tmp_path / "users"
    subprocess.run([str(ROOT / "infra/bin/redis-credentials"), str(users), "127.0.0.1", str(port)], check=True)
    acl = users / "users.acl"
    assert {p.name: p.stat().st_mode & 0o777 for p in users.iterdir()} == {
        "users.acl": 0o600, "services.url": 0o600, "operator.url": 0o600, "health.pass": 0o600}
    assert (users / "operator.url").read_text().split(":")[2].split("@")[0] not in acl.read_text()  # hashes only
    acl.write_text(acl.read_text() + "user inspector on >inspect ~* +config|get +ping\n")
    server = subprocess.Popen(
        ["redis-server", str(ROOT / "infra/redis.conf"), "--port", str(port), "--bind", "127.0.0.1",
         "--aclfile", str(acl)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    client = redis.Redis(port=port, username="inspector", password="inspect")
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
                subprocess.run(["sleep", "0.05"], check=True)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync")["appendfsync"] in ("everysec", "always")
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert int(client.config_get("maxmemory")["maxmemory"] or 0) > 0, "a full Redis refuses writes, never grows on"
        assert client.config_get("protected-mode") == {"protected-mode": "yes"}
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()  # the default user is off
        health = redis.Redis(port=port, username="specdec-health", password=(users / "health.pass").read_text())
        assert health.ping()
        with pytest.raises(redis.exceptions.NoPermissionError):
            health.get("anything")
        health.close()
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=10)
    assert (tmp_path / "appendonlydir").is_dir()



def test_redis_has_a_memory_limit_past_which_it_refuses_writes() -> None:
    """Both Redis configurations set a maxmemory with noeviction: a full Redis refuses writes (OOM errors)
    instead of evicting a stream or growing until it is killed. The compose/Kubernetes file, and
    infra/bin/ensure-redis's command line for the local Redis of `make test`/`make demo`."""
    directives = {parts[0].lower(): parts[1:] for line in (ROOT / "infra/redis.conf").read_text().splitlines()
                  if (parts := line.split()) and not parts[0].startswith("#")}
    assert directives.get("maxmemory-policy") == ["noeviction"]
    [limit] = directives.get("maxmemory", ["0"])
    assert re.fullmatch(r"[1-9][0-9]*(mb|gb)", limit.lower()), f"maxmemory {limit!r} is not a limit"
    script = (ROOT / "infra/bin/ensure-redis").read_text()
    assert re.search(r"--maxmemory [1-9][0-9]*(mb|gb) ", script) and "--maxmemory-policy noeviction" in script

# --- slurm --------------------------------------------------------------------------

SLURM = {"train.sbatch": "trainer-proxy", "serve.sbatch": "bench-runner"}


def render_sbatch(template: str, run_id: str, argv: list[str]) -> str:
    """How specdec fills a template: a validated run ID and Python's repr() of the argv."""
    if not RUN_ID_RE.fullmatch(run_id):
        raise ArgvError(f"{run_id!r} is not a run ID")
    if not argv or not all(isinstance(token, str) for token in argv):
        raise ArgvError("the argv must be a non-empty list of strings")
    return render_token(template, {"run_id": run_id, "argv_literal": repr(list(argv))})


@pytest.mark.parametrize("name", sorted(SLURM))
def test_slurm_template_carries_the_label(name: str) -> None:
    text = (ROOT / "infra/slurm" / name).read_text()
    lines = text.splitlines()
    assert lines[0] == "#!/usr/bin/env python3"
    header = []
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        header.append(line)
    # sbatch reads #SBATCH lines only before the first command.
    assert "#SBATCH --job-name=specdec-{run_id}" in header
    assert "#SBATCH --comment=experiment={run_id}" in header
    assert set(re.findall(r"\{([^{}]*)\}", text)) == {"run_id", "argv_literal"}
    with pytest.raises(ArgvError):
        render_sbatch(text, "toy-1; rm -rf ~", ["true"])


@pytest.mark.parametrize("name", sorted(SLURM))
def test_slurm_template_execs_the_argv_without_a_shell(name: str, tmp_path: Path) -> None:
    run_id = "toy-20261130-000000-abcdef"
    shown = (
        "import json, os, sys; "
        f"print(json.dumps([sys.argv[1:], os.environ[{EXPERIMENT_ENV!r}], os.environ[{SERVICE_ENV!r}]]))"
    )
    hostile = ["$(touch pwned)", "`touch pwned`", "a; touch pwned", "it's \"quoted\"", "{run_id}", "two\nlines",
               "ünï 😀", "*", "--"]
    script = tmp_path / "job.py"
    template = (ROOT / "infra/slurm" / name).read_text()
    script.write_text(render_sbatch(template, run_id, [sys.executable, "-c", shown, *hostile]), encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [hostile, run_id, SLURM[name]]
    assert not (tmp_path / "pwned").exists()
    assert f"#SBATCH --comment=experiment={run_id}" in script.read_text()
