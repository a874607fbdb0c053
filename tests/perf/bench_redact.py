"""Redaction's cost: the whole corpus step on 100 k records, new redaction against today's.

N synthetic traffic records (quick: 5 k) are written to ctx.workdir: chat prose,
Python code, configs, logs and JSON payloads, with planted secrets and
look-alikes (tests/unit/shared/text/planted.py) in about a fifth of them, as
production traffic carries them. The file is profiled once (not timed). Then
fresh subprocesses each run the whole corpus step, `build_corpus` (scan, sample,
fetch and redact every chosen record, dedup, split, write): the reference with
today's redaction (`legacy_redact` below, a verbatim copy of
services/shared/text/redact.py as of commit 166b2cd, patched into the step in
its child), and the new one. Reference and new run alternately (ROUNDS each);
the best wall time of each is compared, since on a shared machine other load
only ever adds time. Each child also times redaction alone over the corpus's
record texts (informational: what redaction itself costs per record).

Goal: the corpus step with the new redaction within 2x today's time.
Measured (2 shared cores, 100 k records, 82 MB): 84.9 s new against 84.8 s
today's (1.00x wall, 0.92x CPU); redaction alone 74.9 us per text against
63.0 us (1.19x).
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
import string
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:  # the runner imports the benches; a bench needs only its context's type
    from tests.perf.runner import PerfContext

N_FULL = 100_000
N_QUICK = 5_000
ROUNDS = 2
TIME_RATIO_GOAL = 2.0
REPO_ROOT = Path(__file__).resolve().parents[2]

_WORDS = (
    "the model answers a question about data and code with short clear steps while users ask for "
    "summaries tables plans reviews fixes tests examples details numbers names places reasons results "
    "please explain why how when where which what could should would report list compare deploy server "
    "cluster latency throughput memory error timeout retry cache queue token request response"
).split()

_CODE = (
    "def {f}(self, {a}: int, {b}: str | None = None) -> dict:\n    \"\"\"{doc}\"\"\"\n"
    "    result = self.{a}_cache.get({b}, {n})\n    for i in range({n}):\n        result[i] = {a} * i + {m}\n"
    "    logger.info(\"{f} done in %.2f s\", time.monotonic() - t0)\n    return result\n"
)
_CONFIG = (
    "server:\n  host: 0.0.0.0\n  port: {p}\n  workers: {n}\nmodel:\n  name: meta-llama/Llama-3.1-8B-Instruct\n"
    "  max_model_len: {m}\n  dtype: bfloat16\nlogging:\n  level: info\n  file: /var/log/{f}/{f}.log\n"
)
_LOG = (
    "2024-0{d}-1{d}T1{d}:2{d}:3{d}.{m}Z INFO  [{f}] request_id={u} latency_ms={n} status=200 bytes={m}\n"
    "2024-0{d}-1{d}T1{d}:2{d}:4{d}.{m}Z WARN  [{f}] retry {d}/5 after timeout on {f}-svc:{p}\n"
)


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_WORDS, k=n))


def _ident(rng: random.Random) -> str:
    return "_".join(rng.choices(_WORDS, k=rng.randint(1, 3)))


def write_traffic(path: Path, n: int, seed: int = 16) -> int:
    """n flat-form records with counts; about 10 % carry a planted secret, 10 % a look-alike."""
    from tests.unit.shared.text import planted

    rng = random.Random(seed)
    secrets = [p.text for p in planted.secrets(seed=seed, per_kind=40)]
    looks = [lk.text for lk in planted.lookalikes(seed=seed, per_kind=20)]
    size = 0
    with path.open("wb") as f:
        for _ in range(n):
            r = rng.random()
            fields = dict(f=_ident(rng), a=_ident(rng), b=_ident(rng), doc=_words(rng, 12), n=rng.randint(1, 4096),
                          m=rng.randint(100, 999), p=rng.randint(1024, 65535), d=rng.randint(1, 9),
                          u=f"{rng.getrandbits(128):032x}")
            if r < 0.40:
                body = _words(rng, rng.randint(20, 160))
            elif r < 0.60:
                body = f"Why is this slow?\n```python\n{_CODE.format(**fields)}```"
            elif r < 0.70:
                body = f"Review this config:\n{_CONFIG.format(**fields)}"
            elif r < 0.80:
                body = f"What do these logs mean?\n{_LOG.format(**fields) * rng.randint(1, 4)}"
            elif r < 0.90:
                body = rng.choice(looks)
            else:
                body = rng.choice(secrets)
            tag = "".join(rng.choices(string.ascii_lowercase, k=10))  # every record unique
            obj = {"prompt": f"{tag} {body}", "completion": _words(rng, rng.randint(10, 80)),
                   "input_tokens": rng.randint(20, 2000), "output_tokens": rng.randint(10, 600)}
            line = orjson.dumps(obj) + b"\n"
            size += len(line)
            f.write(line)
    return size


# =============================================================================
# REFERENCE: today's redaction, verbatim (services/shared/text/redact.py at
# commit 166b2cd: the hand-written regex table), renamed `legacy_redact` and
# its helpers prefixed. Only the benchmark uses it.
# =============================================================================

# Placeholders per kind; the manifest reports counts under these kind names.
LEGACY_PLACEHOLDERS: dict[str, str] = {
    "private_key": "<PRIVATE_KEY>",
    "url_with_credentials": "<URL_WITH_CREDENTIALS>",
    "secret": "<SECRET>",
    "email": "<EMAIL>",
    "ip": "<IP>",
    "card": "<CARD>",
    "ssn": "<SSN>",
    "phone": "<PHONE>",
}
_LEGACY_KINDS: tuple[str, ...] = tuple(LEGACY_PLACEHOLDERS)

_LEGACY_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
# scheme://userinfo@host...: userinfo has no '/', '@' or whitespace.
_LEGACY_URL_WITH_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]+(?::[^\s/@]*)?@[^\s<>\"']+"
)
_LEGACY_SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    # JWT: base64url JSON header and payload (both start '{"' -> 'eyJ').
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
)
_LEGACY_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=-]{16,})")
_LEGACY_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
# IPv6 candidates: hex groups and colons (an IPv4 tail allowed), validated by ipaddress.
_LEGACY_IPV6_CANDIDATE = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?(?![0-9A-Za-z:])"
)
_LEGACY_IPV4 = re.compile(r"(?<![0-9A-Za-z.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![0-9]|\.[0-9])")
_LEGACY_VERSION_PREFIX = re.compile(r"(?i)(?:\bv|\bversion|\bver|\brelease|==|>=|<=|~=|@)\s?$")
# Bare 13-19 digits, or the printed groupings (4-4-4-x, Amex 4-6-5) with one
# consistent separator: free spacing would chain lists of small numbers.
_LEGACY_CARD = re.compile(
    r"(?<![\d-])(?:[2-6]\d{12,18}|[2-6]\d{3}([ -])\d{4}\1\d{4}\1\d{1,7}|3\d{3}([ -])\d{6}\2\d{4,5})(?![\d]|-\d)"
)
_LEGACY_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d]|-\d)")
_LEGACY_SSN_KEYWORD = re.compile(r"(?i)(\b(?:ssn|social security(?: number| no\.?)?)\s*[:#]?\s*)(\d{9})\b")
_LEGACY_PHONE_INTL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?![\d])")
_LEGACY_PHONE_NANP = re.compile(r"(?<![\w.+-])(?:\(\d{3}\)\s?|\d{3}[-. ])\d{3}[-. ]\d{4}(?![\d]|[-.]\d)")


def _legacy_luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _legacy_sub(
    pattern: re.Pattern[str],
    text: str,
    kind: str,
    counts: dict[str, int],
    *, keep: Callable[[re.Match[str]], str | None] | None = None,
) -> str:
    """Replace matches by the kind's placeholder; `keep` may veto (return the
    text to keep) or return a custom replacement."""
    placeholder = LEGACY_PLACEHOLDERS[kind]

    def repl(m: re.Match[str]) -> str:
        if keep is not None:
            custom = keep(m)
            if custom is not None:
                if custom != m.group(0):
                    counts[kind] = counts.get(kind, 0) + 1
                return custom
        counts[kind] = counts.get(kind, 0) + 1
        return placeholder

    return pattern.sub(repl, text)


def _legacy_bearer(m: re.Match[str]) -> str:
    token = m.group(2)
    if any(c.isdigit() or c in "._-+/=" for c in token):
        return m.group(1) + LEGACY_PLACEHOLDERS["secret"]
    return m.group(0)


def _legacy_ipv6(m: re.Match[str]) -> str | None:
    cand = m.group(0)
    try:
        ipaddress.IPv6Address(cand)
    except ValueError:
        return cand
    return None


def _legacy_make_ipv4_keep(text: str) -> Callable[[re.Match[str]], str | None]:
    def keep(m: re.Match[str]) -> str | None:
        if any(int(g) > 255 for g in m.groups()):
            return m.group(0)
        # Only the few characters before the quad matter ("version 1.2.3.4").
        if _LEGACY_VERSION_PREFIX.search(text[max(0, m.start() - 12) : m.start()]):
            return m.group(0)
        return None

    return keep


def _legacy_card(m: re.Match[str]) -> str | None:
    digits = re.sub(r"[ -]", "", m.group(0))
    if 13 <= len(digits) <= 19 and _legacy_luhn_ok(digits):
        return None
    return m.group(0)


def _legacy_phone_intl(m: re.Match[str]) -> str | None:
    n = sum(c.isdigit() for c in m.group(0))
    return None if 8 <= n <= 15 else m.group(0)


def legacy_redact(text: str) -> tuple[str, dict[str, int]]:
    """Return `text` with every detected secret or personal datum replaced by
    its typed placeholder, and the count of replacements per kind (kinds with
    no replacement are absent). Idempotent: redact(redact(t)[0]) finds nothing."""
    counts: dict[str, int] = {}
    if not text:
        return text, counts
    if "PRIVATE KEY-----" in text:
        text = _legacy_sub(_LEGACY_PRIVATE_KEY, text, "private_key", counts)
    if "://" in text and "@" in text:
        text = _legacy_sub(_LEGACY_URL_WITH_CREDENTIALS, text, "url_with_credentials", counts)
    for pattern in _LEGACY_SECRET_PATTERNS:
        text = _legacy_sub(pattern, text, "secret", counts)
    text = _legacy_sub(_LEGACY_BEARER, text, "secret", counts, keep=_legacy_bearer)
    if "@" in text:
        text = _legacy_sub(_LEGACY_EMAIL, text, "email", counts)
    if not any(c.isdigit() for c in text) and "::" not in text:
        return text, counts
    if ":" in text:
        text = _legacy_sub(_LEGACY_IPV6_CANDIDATE, text, "ip", counts, keep=_legacy_ipv6)
    text = _legacy_sub(_LEGACY_IPV4, text, "ip", counts, keep=_legacy_make_ipv4_keep(text))
    text = _legacy_sub(_LEGACY_CARD, text, "card", counts, keep=_legacy_card)
    text = _legacy_sub(_LEGACY_SSN, text, "ssn", counts)
    text = _legacy_sub(
        _LEGACY_SSN_KEYWORD, text, "ssn", counts, keep=lambda m: m.group(1) + LEGACY_PLACEHOLDERS["ssn"]
    )
    if "+" in text:
        text = _legacy_sub(_LEGACY_PHONE_INTL, text, "phone", counts, keep=_legacy_phone_intl)
    text = _legacy_sub(_LEGACY_PHONE_NANP, text, "phone", counts)
    return text, counts


# =============================================================================
# end of the reference
# =============================================================================

_CHILD = """
import json, sys, time
mode, profile, traffic, out = sys.argv[1:5]
import orjson
import services.corpus.traffic as traffic_mod
from services.corpus.build import build_corpus
from tests.perf.peak import peak_kb
if mode == "reference":
    from tests.perf.bench_redact import legacy_redact
    traffic_mod.redact = legacy_redact
    redact_fn = legacy_redact
else:
    from services.shared.text.redact import redact as redact_fn
t0, c0 = time.perf_counter(), time.process_time()
manifest = build_corpus(profile, traffic, out)
t1, c1 = time.perf_counter(), time.process_time()
texts = []
for line in open(traffic, "rb"):
    obj = orjson.loads(line)
    texts.append(obj["prompt"]); texts.append(obj["completion"])
t2 = time.perf_counter()
for t in texts:
    redact_fn(t)
t3 = time.perf_counter()
print(json.dumps({"wall_s": t1 - t0, "cpu_s": c1 - c0, "records": manifest.records.total,
                  "redactions": sum(manifest.redaction.counts.values()), "texts": len(texts),
                  "redact_s": t3 - t2, "chars": sum(map(len, texts)),
                  "peak_kb": peak_kb()}))
"""


def _child(mode: str, profile: Path, traffic: Path, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(profile), str(traffic), str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child ({mode}) failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(name: str, value: float, unit: str, goal: str, *, passed: bool | None, reference: str | None = None,
         reference_value: float | None = None) -> dict:  # fmt: skip
    return {"name": name, "value": value, "unit": unit, "reference": reference, "reference_value": reference_value,
            "ratio": value / reference_value if reference_value else None, "goal": goal, "passed": passed}


def bench(ctx: PerfContext) -> list[dict]:
    from services.profiler.profile import profile_traffic

    n = N_QUICK if ctx.quick else N_FULL
    work = Path(ctx.workdir)
    traffic = work / f"redact-traffic-{n}.jsonl"
    size = write_traffic(traffic, n)
    profile = work / "PROFILE.json"
    profile.write_text(profile_traffic(traffic, reject_threshold=1.0).model_dump_json(), encoding="utf-8")
    runs: dict[str, list[dict]] = {"reference": [], "new": []}
    for _ in range(ROUNDS):
        for mode in ("reference", "new"):
            runs[mode].append(_child(mode, profile, traffic, work / f"CORPUS-{mode}.jsonl"))
    ref = min(runs["reference"], key=lambda r: r["wall_s"])
    new = min(runs["new"], key=lambda r: r["wall_s"])
    # Dedup runs on redacted text, so the two corpora may differ by a few near duplicates; not by more.
    if abs(ref["records"] - new["records"]) > 0.01 * ref["records"]:
        raise RuntimeError(f"the two runs built different corpora: {ref['records']} vs {new['records']} records")
    ratio = new["wall_s"] / ref["wall_s"]
    label = f"{n:,} records, {size / 1e6:.0f} MB"
    per_text_new = new["redact_s"] / new["texts"] * 1e6
    per_text_ref = ref["redact_s"] / ref["texts"] * 1e6
    return [
        _row(
            f"corpus step wall time, new redaction ({label})",
            new["wall_s"],
            "s",
            f"<= {TIME_RATIO_GOAL:g}x reference" + (" (judged at 100,000 records)" if ctx.quick else ""),
            passed=None if ctx.quick else ratio <= TIME_RATIO_GOAL,
            reference="the same step with today's redaction (legacy_redact)",
            reference_value=ref["wall_s"],
        ),
        _row(
            f"corpus step CPU time, new redaction ({label})",
            new["cpu_s"],
            "s",
            "informational (same goal)",
            passed=None,
            reference="CPU time with today's redaction",
            reference_value=ref["cpu_s"],
        ),
        _row(
            f"redaction alone per text ({new['texts']:,} texts, {new['chars'] / new['texts']:.0f} chars avg)",
            per_text_new,
            "us",
            "informational",
            passed=None,
            reference="today's redaction per text",
            reference_value=per_text_ref,
        ),
        _row(
            f"replacements in the corpus ({new['records']:,} records)",
            float(new["redactions"]),
            "count",
            "informational: more kinds are found",
            passed=None,
            reference="today's redaction",
            reference_value=float(ref["redactions"]),
        ),
        _row(
            f"corpus step peak memory, new redaction ({label})",
            new["peak_kb"] / 1024,
            "MB",
            "informational",
            passed=None,
            reference="peak memory with today's redaction",
            reference_value=ref["peak_kb"] / 1024,
        ),
    ]
