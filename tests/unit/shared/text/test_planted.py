"""The planted set through the whole corpus step: secrets do not survive, look-alikes do.

Traffic is built from `planted` (formats only, no detector knowledge): every
secret and personal-data kind x 100 instances in its realistic contexts, in
prompts, completions and chat messages, plus look-alike kinds x 40, plus
malformed lines quoting secrets (the profiler's rejected-line examples). The
real profiler and `build_corpus` run on it; then every byte the step wrote (the
corpus, its manifest, the profile), everything logged or printed, and the
errors that quote traffic are searched for the planted values.

Goal: at most 1 % of any kind's planted secrets survive, and at
least 95 % of each look-alike kind survives unchanged. The per-kind table is
printed (pytest -s shows it) and written beside the corpus as planted-report.json.
"""

from __future__ import annotations

import json
import logging
import math
import random
import string
from collections import Counter

import pytest

from services.corpus.build import build_corpus
from services.corpus.errors import TrafficUnusable
from services.profiler.profile import profile_traffic
from services.shared.text.redact import KINDS
from tests.unit.shared.text import planted

SECRETS_PER_KIND = 100
LOOKALIKES_PER_KIND = 40
MAX_SURVIVAL = 0.01
MIN_KEPT = 0.95


def _tag(rng: random.Random) -> str:
    return "ref " + "".join(rng.choices(string.ascii_lowercase, k=12))


def _row(rng: random.Random, tag: str, text: str) -> dict:
    """One traffic line carrying `text`: as a prompt, a completion or a chat turn."""
    form = rng.random()
    if form < 0.55:
        return {"prompt": f"{tag}\n{text}", "completion": planted.filler(rng, 6)}
    if form < 0.8:
        return {"prompt": f"{tag}\n{planted.filler(rng, 10)}", "completion": text}
    return {
        "request": {"model": "m", "messages": [{"role": "system", "content": f"{tag} you help with ops"},
                                               {"role": "user", "content": text}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": planted.filler(rng, 5)}}]},
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("planted")
    rng = random.Random(1616)
    secrets = planted.secrets(per_kind=SECRETS_PER_KIND)
    looks = planted.lookalikes(per_kind=LOOKALIKES_PER_KIND)
    tags: dict[str, tuple[str, object]] = {}
    rows: list[str] = []
    items: list[planted.Planted | planted.Lookalike] = [*secrets, *looks]
    for item in items:
        tag = _tag(rng)
        tags[tag] = ("secret" if isinstance(item, planted.Planted) else "look", item)
        rows.append(json.dumps(_row(rng, tag, item.text)))
    # Malformed lines that quote secrets: the profiler keeps the first ones as (redacted) examples.
    broken = [s for s in secrets if s.context != "json"][:: len(secrets) // 20][:20]
    lines = rows[:]
    for i, item in enumerate(broken):
        lines.insert(10 + i * 50, '{"prompt": ' + json.dumps(item.text)[:-1])  # unterminated string: not JSON
    rng.shuffle(rows)
    traffic = work / "traffic.jsonl"
    traffic.write_text("\n".join(lines) + "\n", encoding="utf-8")

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Keep(level=logging.DEBUG)
    root.addHandler(handler)
    try:
        profile = profile_traffic(traffic, reject_threshold=1.0)
        profile_path = work / "PROFILE.json"
        profile_path.write_text(profile.model_dump_json(indent=2), encoding="utf-8")
        out = work / "CORPUS.jsonl"
        manifest = build_corpus(profile_path, traffic, out)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    # Errors quote traffic through the same redaction: one per planted secret.
    errors = "\n".join(str(TrafficUnusable(f"line 7 could not be used: {s.text}")) for s in secrets)
    return {
        "work": work, "secrets": secrets, "looks": looks, "tags": tags, "broken": broken, "manifest": manifest,
        "corpus": [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()],
        "written": out.read_text(encoding="utf-8")
        + out.with_name(out.name + ".manifest.json").read_text(encoding="utf-8")
        + profile_path.read_text(encoding="utf-8"),
        "logs": "\n".join(records), "errors": errors,
    }


def _record_text(record: dict) -> str:
    parts = [m["content"] for m in record["messages"]]
    if record["reference_completion"] is not None:
        parts.append(record["reference_completion"])
    return "\n".join(parts)


def _evaluate(run: dict) -> dict:
    by_tag: dict[str, str] = {}
    for record in run["corpus"]:
        text = _record_text(record)
        by_tag[text[text.index("ref ") : text.index("ref ") + 16]] = text
    everywhere = run["written"] + "\n" + run["logs"]
    planted_n: Counter[str] = Counter()
    survived: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    looks_n: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for tag, (what, item) in run["tags"].items():
        found = by_tag.get(tag)
        if what == "secret":
            planted_n[item.kind] += 1
            if found is None:
                missing[item.kind] += 1
                continue
            leaked = [n for n in item.needles if n in found or n in everywhere or json.dumps(n)[1:-1] in everywhere]
            if leaked:
                survived[item.kind] += 1
                examples.setdefault(item.kind, []).append(f"{item.context}: {leaked[0]!r}")
        else:
            looks_n[item.kind] += 1
            if found is not None and item.value in found:
                kept[item.kind] += 1
            elif found is not None:
                examples.setdefault(f"look:{item.kind}", []).append(f"{item.context}: {item.value!r}")
    return {"planted": planted_n, "survived": survived, "missing": missing, "looks": looks_n, "kept": kept,
            "examples": examples}


def _table(ev: dict) -> str:
    lines = [f"{'secret / personal-data kind':28} planted survived", "-" * 46]
    for kind in sorted(ev["planted"]):
        lines.append(f"{kind:28} {ev['planted'][kind]:7d} {ev['survived'][kind]:8d}")
    lines.append(f"{'total':28} {sum(ev['planted'].values()):7d} {sum(ev['survived'].values()):8d}")
    lines += ["", f"{'look-alike kind':28} planted     kept", "-" * 46]
    for kind in sorted(ev["looks"]):
        lines.append(f"{kind:28} {ev['looks'][kind]:7d} {ev['kept'][kind]:8d}")
    lines.append(f"{'total':28} {sum(ev['looks'].values()):7d} {sum(ev['kept'].values()):8d}")
    return "\n".join(lines)


def test_the_generated_set_is_big_enough_and_deterministic() -> None:
    secrets = planted.secrets(per_kind=SECRETS_PER_KIND)
    kinds = Counter(s.kind for s in secrets)
    assert len(kinds) >= 20 and min(kinds.values()) >= 20
    for kind in kinds:
        assert len({s.context for s in secrets if s.kind == kind}) >= 3, kind
    looks = planted.lookalikes(per_kind=LOOKALIKES_PER_KIND)
    assert len({lk.kind for lk in looks}) >= 20
    assert secrets == planted.secrets(per_kind=SECRETS_PER_KIND) and looks == planted.lookalikes(
        per_kind=LOOKALIKES_PER_KIND
    )
    assert secrets != planted.secrets(seed=17, per_kind=SECRETS_PER_KIND)
    for s in secrets:  # every needle really is in its text, so a survival is measurable
        assert all(n in s.text or json.dumps(n)[1:-1] in s.text for n in s.needles), (s.kind, s.context)


def test_planted_secrets_do_not_survive_the_corpus_step(run: dict) -> None:
    ev = _evaluate(run)
    report = _table(ev)
    print("\n" + report)
    (run["work"] / "planted-report.json").write_text(json.dumps({k: v for k, v in ev.items()}, indent=2, default=dict))
    # Every planted record reached the corpus: the measurement covers them all.
    assert not ev["missing"], ev["missing"]
    for kind, n in ev["planted"].items():
        allowed = math.floor(MAX_SURVIVAL * n)
        assert ev["survived"][kind] <= allowed, (
            f"{kind}: {ev['survived'][kind]}/{n} survived: {ev['examples'].get(kind)}\n{report}"
        )


def test_lookalikes_survive_unchanged(run: dict) -> None:
    ev = _evaluate(run)
    for kind, n in ev["looks"].items():
        assert ev["kept"][kind] >= MIN_KEPT * n, (
            f"{kind}: {ev['kept'][kind]}/{n} kept: {ev['examples'].get('look:' + kind)}"
        )


def test_errors_and_rejected_examples_are_redacted(run: dict) -> None:
    for item in run["secrets"]:
        assert not any(n in run["errors"] for n in item.needles), item.kind
    profile = json.loads((run["work"] / "PROFILE.json").read_text())
    examples = profile["records"]["rejected_examples"]
    assert len(examples) == len(run["broken"])  # every broken line was kept as an example
    assert any("<SECRET:" in e["excerpt"] or "<PII:" in e["excerpt"] for e in examples)
    for item in run["broken"]:
        for needle in item.needles:
            assert not any(needle[:20] in e["excerpt"] for e in examples), (item.kind, needle)


def test_the_manifest_counts_findings_per_kind(run: dict) -> None:
    redaction = run["manifest"].redaction
    assert set(redaction.counts) == set(KINDS)
    assert redaction.placeholders["phone"] == "<PII:phone>" and "detect-secrets" in (redaction.ruleset or "")
    assert redaction.records_redacted >= len(run["secrets"])
    # Each placeholder in the corpus is one counted finding.
    text = "\n".join(_record_text(r) for r in run["corpus"])
    for kind, placeholder in redaction.placeholders.items():
        assert text.count(placeholder) == redaction.counts[kind], kind
    for kind in ("password", "aws_secret_key", "phone", "iban", "private_key", "private_key_id", "url_credentials",
                 "huggingface_token", "azure_storage_key", "slack_webhook", "uk_nino", "email", "ip", "card", "us_ssn"):
        assert redaction.counts[kind] > 0, kind

