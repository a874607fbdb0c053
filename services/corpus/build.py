"""`build_corpus`: PROFILE.json + traffic -> CORPUS.jsonl and its manifest.

One scan of the traffic keeps numbers, not text; the chosen lines are then fetched redacted, deduplicated,
sampled to the profile and split. The template is loaded before the traffic is read, so a bad one fails
first, and the files are written atomically: a failed step leaves no corpus behind (docs/corpus.md)."""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
from pydantic import ValidationError

from contracts.artifacts import corpus as m
from contracts.artifacts.profile import Profile
from services.corpus.dedup import NEAR_DUP_THRESHOLD, NearDuplicateIndex, exact_key
from services.corpus.errors import CorpusSkipped, InvalidCorpusOptions, ProfileUnusable, TrafficUnusable
from services.corpus.render import render_check
from services.corpus.sample import (
    allocate,
    allocate_split,
    binned_ks,
    bucket_index,
    default_size,
    priorities,
    rake,
    total_variation,
)
from services.corpus.traffic import Fetched, Scan, fetch, prompt_text, scan
from services.shared.text.chat_template import ChatTemplate, load_chat_template
from services.shared.text.content import CONTENT_CLASSES
from services.shared.text.errors import TokenizerError, TokenizerUnusable
from services.shared.text.redact import KINDS, PLACEHOLDERS, merge_counts, ruleset
from services.shared.text.tokens import TokenizerCounter

RENDER_SAMPLE_MAX = 2000
# A stratum's first fetch takes this share more than its quota, to cover
# near duplicates without a second pass over the file in the common case.
FETCH_SLACK = 0.1
DISTANCE_METHOD = (
    "KS: max |F_corpus - F_profile| over the profile histogram's bin edges (shares of records below each "
    "edge); TV: half the L1 distance between content-class shares. traffic_*: the same for every unique "
    "usable traffic record, before sampling."
)


def load_profile(path: Path) -> tuple[Profile, str]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileUnusable(
            f"cannot read profile {path}: {exc.strerror}; pass --profile the PROFILE.json of `specdec profile`"
        ) from exc
    try:
        profile = Profile.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_input=False)[:5])
        raise ProfileUnusable(
            f"{path} is not a valid PROFILE.json ({problems}); regenerate it with `specdec profile`"
        ) from None
    return profile, hashlib.sha256(data).hexdigest()


def _check_options(size: int | None, heldout_share: float, max_model_len: int | None) -> None:
    if size is not None and size < 1:
        raise InvalidCorpusOptions(
            f"--size must be at least 1 (got {size}); leave it out for the largest matched corpus"
        )
    if not (0.0 <= heldout_share <= 1.0) or math.isnan(heldout_share):
        raise InvalidCorpusOptions(f"--heldout-share must be between 0 and 1 (got {heldout_share}); the default is 0.1")
    if max_model_len is not None and max_model_len < 1:
        raise InvalidCorpusOptions(f"--max-model-len must be at least 1 (got {max_model_len})")


def _select(
    traffic: Path, quota: np.ndarray, sid: np.ndarray, prio: np.ndarray, *, line: np.ndarray, n_strata: int
) -> tuple[dict[int, list[tuple[int, Fetched, int]]], int, int]:
    """Per stratum, the chosen (unique index, fetched record, redacted key), in
    priority order, with the exact (after redaction) and near duplicates dropped."""
    order = np.lexsort((prio, sid))
    starts = np.searchsorted(sid[order], np.arange(n_strata + 1))
    pointer = starts[:-1].copy()
    chosen: dict[int, list[tuple[int, Fetched, int]]] = {s: [] for s in range(n_strata)}
    seen_keys: set[int] = set()
    index = NearDuplicateIndex()
    exact = near = 0
    first_round = True
    while True:
        batch: list[int] = []
        for s in range(n_strata):
            short = int(quota[s]) - len(chosen[s])
            if short <= 0:
                continue
            take = short + math.ceil(short * FETCH_SLACK) + 2 if first_round else 2 * short + 2
            end = min(int(pointer[s]) + take, int(starts[s + 1]))
            batch.extend(int(i) for i in order[pointer[s] : end])
            pointer[s] = end
        first_round = False
        if not batch:
            return chosen, exact, near
        fetched = fetch(traffic, {int(line[i]) for i in batch})
        for i in sorted(batch, key=lambda i: prio[i]):
            s = int(sid[i])
            if len(chosen[s]) >= quota[s]:
                continue
            record = fetched[int(line[i])]
            text = prompt_text(record.messages)
            key = exact_key(text)
            if key in seen_keys:
                exact += 1
                continue
            if not index.add_if_new(text):
                near += 1
                continue
            seen_keys.add(key)
            chosen[s].append((i, record, key))


def _render(
    template: ChatTemplate | None,
    tokenizer_dir: str | Path | None,
    records: list[m.CorpusRecord],
    max_model_len: int | None,
) -> m.RenderCheck:
    if template is None:
        reason = "no --tokenizer folder given" if tokenizer_dir is None else f"{tokenizer_dir} has no chat template"
        return m.RenderCheck(
            status="not_run", reason=reason, template_source=None, records_rendered=0,
            max_tokens_seen=None, max_model_len=max_model_len,
        )
    sample = [r.model_dump() for r in records[:RENDER_SAMPLE_MAX]]
    summary = render_check(template, sample, max_model_len)
    return m.RenderCheck(
        status="passed", reason=None, template_source=template.source, max_model_len=max_model_len, **summary
    )


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_corpus(
    profile_path: str | Path,
    traffic_path: str | Path,
    out_path: str | Path,
    *,
    tokenizer_dir: str | Path | None = None,
    size: int | None = None,
    heldout_share: float = 0.1,
    seed: int = 0,
    max_model_len: int | None = None,
) -> m.CorpusManifest:
    """Build CORPUS.jsonl at `out_path` and `<out_path>.manifest.json`; return the manifest.

    Raises CorpusSkipped for a shapes-only profile, another CorpusError (with
    what to do) when an input is unusable, and the shared TokenizerUnusable /
    RenderCheckFailed when the tokenizer folder is unusable or the render check fails.
    """
    _check_options(size, heldout_share, max_model_len)
    profile, profile_sha = load_profile(Path(profile_path))
    if profile.source == "shapes":
        names = ", ".join(profile.input.shapes) or "none"
        raise CorpusSkipped(
            f"the profile is shapes-only (shapes: {names}): there is no traffic to build a corpus from; "
            "candidates must need no training (ngram, suffix) or name an existing draft checkpoint"
        )
    traffic, out = Path(traffic_path), Path(out_path)
    if out.resolve() in (traffic.resolve(), Path(profile_path).resolve()):
        raise InvalidCorpusOptions(f"--out {out} is one of the inputs; write the corpus to a new file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidCorpusOptions(f"cannot create output folder {out.parent}: {exc.strerror}; check --out") from exc
    template = load_chat_template(tokenizer_dir) if tokenizer_dir is not None else None
    if max_model_len is None and template is not None:
        max_model_len = template.model_max_length
    try:
        tokenizer = TokenizerCounter(tokenizer_dir) if tokenizer_dir is not None else None
    except TokenizerError as exc:
        raise TokenizerUnusable(str(exc)) from None

    sc = scan(traffic, tokenizer, max_model_len)
    if sc.line.buffer_info()[1] == 0:
        raise TrafficUnusable(
            f"{traffic} has no usable record: {sc.accepted} accepted, {sc.rejected} rejected, skipped {sc.skipped}; "
            "the corpus needs prompts with text and an output count or completion"
        )
    st = _strata(profile, sc)
    n = size if size is not None else default_size(st.target, st.joint)
    quota = allocate(st.target, n, st.joint.astype(np.int64)).ravel()
    prio = priorities(st.key, seed, 0)
    chosen, exact_after, near = _select(traffic, quota, st.sid, prio, line=st.line, n_strata=st.joint.size)
    corpus, selected, heldout_n = _records(st, chosen, prio, heldout_share, seed=seed)

    render = _render(template, tokenizer_dir, corpus, max_model_len)
    data = b"".join(orjson.dumps(r.model_dump()) + b"\n" for r in corpus)
    corpus_counts: dict[str, int] = dict.fromkeys(KINDS, 0)
    for items in chosen.values():
        for _, rec, _ in items:
            merge_counts(corpus_counts, rec.redactions)
    manifest = _manifest(
        profile,
        profile_sha,
        sc,
        st,
        out=out,
        data=data,
        corpus=corpus,
        seed=seed,
        size=size,
        heldout_share=heldout_share,
        render=render,
        tokenizer_dir=tokenizer_dir,
        max_model_len=max_model_len,
        exact=st.exact_duplicates + exact_after,
        near=near,
        corpus_counts=corpus_counts,
        redacted_records=sum(bool(rec.redactions) for items in chosen.values() for _, rec, _ in items),
        quota=quota,
        selected=selected,
        heldout_n=heldout_n,
    )
    _write_atomic(out, data)
    _write_atomic(out.with_name(out.name + ".manifest.json"), manifest.model_dump_json(indent=2).encode() + b"\n")
    return manifest


@dataclass
class _Strata:
    """The unique usable records' numbers and the stratum table."""

    key: np.ndarray
    line: np.ndarray
    cls: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    sid: np.ndarray  # stratum index: bucket * n_classes + class
    edges: np.ndarray  # input-length bucket edges (the profile histogram's, + inf)
    joint: np.ndarray  # unique records per (bucket, class)
    target: np.ndarray  # target share per (bucket, class)
    unreachable: float
    exact_duplicates: int


def _strata(profile: Profile, sc: Scan) -> _Strata:
    """Exact dedup on the in-memory prompt key (first occurrence wins), the
    (bucket x class) table, and the target raked to the profile's marginals."""
    keys = sc.column("key")
    _, first = np.unique(keys, return_index=True)
    first.sort()
    cls, n_in = sc.column("cls")[first], sc.column("input_tokens")[first]
    hist = profile.input_tokens.histogram
    edges = np.asarray([b.lower for b in hist] + [np.inf], dtype=float)
    bucket = bucket_index(edges, n_in)
    n_c = len(CONTENT_CLASSES)
    joint = np.zeros((len(hist), n_c))
    np.add.at(joint, (bucket, cls), 1)
    rows = np.asarray([b.count for b in hist], dtype=float)
    mix = profile.content_mix
    # A profile without a content mix (no text was classified) leaves the traffic's own class shares.
    cols = (
        np.asarray([getattr(mix, c) for c in CONTENT_CLASSES], dtype=float) if mix.reason is None else joint.sum(axis=0)
    )
    target, unreachable = rake(joint, rows if rows.sum() > 0 else joint.sum(axis=1), cols)
    return _Strata(
        key=keys[first], line=sc.column("line")[first], cls=cls, input_tokens=n_in,
        output_tokens=sc.column("output_tokens")[first], sid=bucket * n_c + cls, edges=edges, joint=joint,
        target=target, unreachable=unreachable, exact_duplicates=len(keys) - len(first),
    )


def _records(
    st: _Strata, chosen: dict[int, list[tuple[int, Fetched, int]]], prio: np.ndarray, heldout_share: float, *, seed: int
) -> tuple[list[m.CorpusRecord], np.ndarray, np.ndarray]:
    """Corpus records in sampling-priority order; per stratum, the first in a
    second seeded order go to heldout. Returns records, selected and heldout per stratum."""
    selected = np.asarray([len(chosen[s]) for s in range(st.joint.size)])
    heldout_n = allocate_split(selected, heldout_share)
    records: list[tuple[float, m.CorpusRecord]] = []
    for s, items in chosen.items():
        split_prio = priorities(np.asarray([k for _, _, k in items], dtype=np.uint64), seed, 1)
        for rank, j in enumerate(np.argsort(split_prio, kind="stable")):
            i, rec, key = items[int(j)]
            record = m.CorpusRecord(
                id=f"{key:016x}",
                messages=[m.ChatMessage(**msg) for msg in rec.messages],
                reference_completion=rec.completion,
                input_tokens=int(st.input_tokens[i]),
                output_tokens=int(st.output_tokens[i]),
                content_class=CONTENT_CLASSES[int(st.cls[i])],
                split="heldout" if rank < heldout_n[s] else "train",
            )
            records.append((float(prio[i]), record))
    records.sort(key=lambda pr: pr[0])
    return [r for _, r in records], selected, heldout_n


def _manifest(
    profile: Profile, profile_sha: str, sc: Scan, st: _Strata, *, out: Path, data: bytes, corpus: list[m.CorpusRecord],
    seed: int, size: int | None, heldout_share: float, render: m.RenderCheck,
    tokenizer_dir: str | Path | None, max_model_len: int | None, exact: int, near: int,
    corpus_counts: dict[str, int], redacted_records: int, quota: np.ndarray, selected: np.ndarray,
    heldout_n: np.ndarray,
) -> m.CorpusManifest:
    n_c = len(CONTENT_CLASSES)
    ref_in = [b.count for b in profile.input_tokens.histogram]
    out_hist = profile.output_tokens.histogram
    out_edges = np.asarray([b.lower for b in out_hist] + [np.inf], dtype=float)
    ref_out = [b.count for b in out_hist]
    mix = profile.content_mix
    ref_mix = {c: getattr(mix, c) for c in CONTENT_CLASSES} if mix.reason is None else {}
    classes = {c: 0 for c in CONTENT_CLASSES}
    for r in corpus:
        classes[r.content_class] += 1
    traffic_classes = {c: int(np.count_nonzero(st.cls == k)) for k, c in enumerate(CONTENT_CLASSES)}
    c_in = np.asarray([r.input_tokens for r in corpus])
    c_out = np.asarray([r.output_tokens for r in corpus])
    heldout = sum(r.split == "heldout" for r in corpus)
    hist_in = profile.input_tokens.histogram
    flat_target, flat_joint = st.target.ravel(), st.joint.ravel()
    return m.CorpusManifest(
        corpus_file=out.name,
        corpus_sha256=hashlib.sha256(data).hexdigest(),
        corpus_size_bytes=len(data),
        profile_sha256=profile_sha,
        traffic_sha256=sc.sha256,
        traffic_is_profiled_file=profile.input.sha256 == sc.sha256,
        tokenizer_dir=None if tokenizer_dir is None else str(tokenizer_dir),
        max_model_len=max_model_len,
        seed=seed,
        size_requested=size,
        heldout_share=heldout_share,
        near_duplicate_threshold=NEAR_DUP_THRESHOLD,
        records=m.Splits(train=len(corpus) - heldout, heldout=heldout, total=len(corpus)),
        content_classes=classes,
        input=m.InputAccounting(
            lines=sc.lines, blank_lines=sc.blank_lines, accepted=sc.accepted, rejected=sc.rejected,
            rejected_by_kind=sc.rejected_by_kind,
            rejected_examples=[m.RejectedExample(**e) for e in sc.rejected_examples],
            skipped=sc.skipped, exact_duplicates=exact, near_duplicates=near, unique=len(st.key),
        ),
        token_sources=m.TokenSources(input=sc.input_sources, output=sc.output_sources),
        redaction=m.Redaction(
            counts=corpus_counts, records_redacted=redacted_records, diagnostics_counts=sc.diagnostics_redactions,
            ruleset=ruleset(), placeholders=dict(PLACEHOLDERS),
        ),
        distance=m.Distance(
            method=DISTANCE_METHOD,
            ks_input_tokens=binned_ks(st.edges, ref_in, c_in),
            ks_output_tokens=binned_ks(out_edges, ref_out, c_out),
            tv_content_class=total_variation(ref_mix, classes) if ref_mix else None,
            traffic_ks_input_tokens=binned_ks(st.edges, ref_in, st.input_tokens),
            traffic_ks_output_tokens=binned_ks(out_edges, ref_out, st.output_tokens),
            traffic_tv_content_class=total_variation(ref_mix, traffic_classes) if ref_mix else None,
            unreachable_target_share=min(1.0, max(0.0, st.unreachable)),
        ),
        strata=[
            m.Stratum(
                input_lower=hist_in[s // n_c].lower, input_upper=hist_in[s // n_c].upper,
                content_class=CONTENT_CLASSES[s % n_c], target=float(min(1.0, flat_target[s])),
                available=int(flat_joint[s]), quota=int(quota[s]), selected=int(selected[s]),
                heldout=int(heldout_n[s]),
            )
            for s in range(len(flat_target))
            if flat_target[s] > 0 or flat_joint[s] > 0
        ],
        render_check=render,
    )
