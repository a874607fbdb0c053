"""The profiler's entry points: `profile_traffic(path, ...)` and `profile_shapes(names)`.

`profile_traffic` streams the file once (line by line, bytes hashed as read; a line over
`services.shared.text.lines.MAX_LINE_BYTES` refuses the file before it is held),
keeps only per-record numbers plus a bounded sample, and assembles the
`Profile`. Bad lines are data: counted, the first ones kept (redacted); the run
fails only when their share passes the threshold.
"""

from __future__ import annotations

import hashlib
import math
import os
from array import array
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

from contracts.artifacts.profile import (
    Concurrency,
    ContentMix,
    CountSources,
    InputInfo,
    Profile,
    Records,
    RejectedLine,
    Repetition,
    Sampling,
    TokenCounting,
    TokenStats,
)
from services.profiler import stats
from services.profiler.counting import SideSources, TokenCounter
from services.profiler.defaults import DEFAULT_REJECT_THRESHOLD, DEFAULT_SAMPLE_CAP
from services.profiler.errors import EmptyTraffic, ProfilerError, TooManyRejected, TrafficNotFound
from services.profiler.ngram_advice import AdviceEvidence, advise, span_evidence
from services.profiler.recommend import Evidence, recommend
from services.profiler.repetition import NGRAM_N, TEXT_CAP_CHARS, measure
from services.shared.text import content as content_mod
from services.shared.text import forms
from services.shared.text.lines import read_lines
from services.shared.text.redact import cut, redact
from services.shared.text.shapes import resolve
from services.shared.text.tokens import ESTIMATE_METHOD, TokenizerCounter

MAX_REJECTED_EXAMPLES = 20
EXCERPT_CHARS = 160
# A rejected line is redacted whole (up to this many characters) *before* it is cut
# to EXCERPT_CHARS, so a secret that straddles the cut is still recognised.
REDACT_WINDOW_CHARS = 65536
SAMPLING_METHOD = (
    "even (golden-ratio Weyl sequence over the accepted-record index): about one record in `stride` is measured; "
    "the stride starts at 1 (or at what the file size predicts) and doubles whenever the sample passes its cap, "
    "dropping the kept records the new stride would not take, so the sample spans the whole file"
)
_HINT_AFTER_LINES = 4096
_NO_LABEL = -1  # a sampled record without text (counts only) is not classified
_UTF8_BOM = b"\xef\xbb\xbf"


def profile_traffic(
    path: str | os.PathLike[str],
    *,
    tokenizer_dir: str | os.PathLike[str] | None = None,
    reject_threshold: float = DEFAULT_REJECT_THRESHOLD,
    sample_cap: int = DEFAULT_SAMPLE_CAP,
) -> Profile:
    """Profile one traffic JSONL file.

    Raises a `ProfilerError` subclass on whole-run failure, and the shared
    `TokenizerError` when `tokenizer_dir` holds no loadable tokenizer.json.
    """
    if not 0.0 <= reject_threshold <= 1.0:
        raise ProfilerError(
            f"reject threshold {reject_threshold} is not a share: give a number from 0 to 1 (0.05 is 5 %)"
        )
    if sample_cap < 2:
        raise ProfilerError(f"sample cap {sample_cap} is too small: give at least 2")
    tokenizer = TokenizerCounter(Path(tokenizer_dir)) if tokenizer_dir is not None else None
    scan = _Scan(TokenCounter(tokenizer), sample_cap)
    try:
        handle = open(path, "rb")  # closed by the with below
    except OSError as exc:
        raise TrafficNotFound(f"cannot read traffic file {path}: {exc.strerror}; check the path") from exc
    with handle:
        scan.run(handle, path)

    records = scan.records(reject_threshold)
    profile = _assemble(scan, records, path, tokenizer_dir)
    if records.accepted == 0:
        raise EmptyTraffic(
            f"{path} has no usable record ({records.rejected} rejected, {records.blank_lines} blank): "
            "give a JSONL file with one request a line in a documented form (docs/profiler.md)"
        )
    if records.rejected_share > reject_threshold:
        shown = "; ".join(f"line {e.line} ({e.kind}): {e.reason}" for e in records.rejected_examples[:5])
        raise TooManyRejected(
            f"{records.rejected} of {records.accepted + records.rejected} lines of {path} were rejected "
            f"({records.rejected_share:.1%}, above the {reject_threshold:.1%} threshold). First: {shown}. "
            "Fix or drop those lines, or raise the threshold (--reject-threshold).",
            profile,
        )
    return profile


def profile_shapes(names: list[str] | None = None) -> Profile:
    """Profile named workload shapes (all of them when `names` is empty or None)."""
    chosen = resolve(names)
    inputs = np.array([s.input_tokens for s in chosen], dtype=np.int64)
    outputs = np.array([s.output_tokens for s in chosen], dtype=np.int64)
    no_text = "workload shapes carry lengths only, no text"
    out_stats = TokenStats(**stats.summarize(outputs))
    return Profile(
        source="shapes",
        input=InputInfo(path=None, sha256=None, size_bytes=0, shapes=[s.name for s in chosen]),
        records=Records(
            accepted=0, rejected=0, blank_lines=0, rejected_share=0.0, reject_threshold=DEFAULT_REJECT_THRESHOLD,
            rejected_by_kind={}, rejected_examples=[], forms={f: 0 for f in forms.FORMS},
        ),
        token_counting=TokenCounting(
            tokenizer_dir=None, estimate_method=ESTIMATE_METHOD, estimated_records=0,
            input=CountSources(from_fields=0, from_tokenizer=0, estimated=0, missing=0),
            output=CountSources(from_fields=0, from_tokenizer=0, estimated=0, missing=0),
        ),
        input_tokens=TokenStats(**stats.summarize(inputs)),
        output_tokens=out_stats,
        concurrency=Concurrency(
            records_with_times=0, records_with_start=0, mean=None, max=None, arrival_rate_per_s=None, span_s=None,
            reason="workload shapes carry no times: the bench sets concurrency per cell",
        ),
        content_mix=_empty_mix(no_text, 0),
        repetition=_empty_repetition(no_text, 0),
        sampling=Sampling(method=SAMPLING_METHOD, cap=DEFAULT_SAMPLE_CAP, stride=1, records_considered=0,
                          records_sampled=0, sampled=False),
        shapes=chosen,
        recommended_method=recommend(Evidence(out_stats.p50, None, None, None)),
        ngram_advice=advise(AdviceEvidence(None, no_text, None, None, out_stats.p50, None)),
    )


class _Scan:
    """One pass over the file: per-line parsing, counting and sampling."""

    def __init__(self, counter: TokenCounter, sample_cap: int) -> None:
        self.counter = counter
        self.sampler = stats.StrideSampler(sample_cap)
        self.inputs = stats.Column("q")
        self.outputs = stats.Column("q")
        self.starts = stats.Column("d")
        self.latencies = stats.Column("d")  # NaN where a started record has no latency
        self.append_input, self.append_output = self.inputs.values.append, self.outputs.values.append
        self.append_start, self.append_latency = self.starts.values.append, self.latencies.values.append
        self.hasher = hashlib.sha256()
        self.size_bytes = 0
        self.accepted = 0
        self.blank = 0
        self.rejected_by_kind: dict[str, int] = {}
        self.examples: list[RejectedLine] = []
        self.forms = {f: 0 for f in forms.FORMS}

    def run(self, handle: BinaryIO, path: str | os.PathLike[str]) -> None:
        # Locals instead of attribute lookups: this loop runs once per line of a
        # possibly million-line file.
        loads, decode_error, parse = orjson.loads, orjson.JSONDecodeError, forms.parse_object
        line_error, update = forms.LineError, self.hasher.update
        line_no = 0
        size = 0
        try:
            file_size = os.fstat(handle.fileno()).st_size
        except (OSError, AttributeError, ValueError):  # not a regular file (pipe, in-memory): no hint
            file_size = 0
        for raw in read_lines(handle, path):
            line_no += 1
            update(raw)
            size += len(raw)
            if line_no == _HINT_AFTER_LINES and file_size and self.accepted:
                # Skip sample strides the file is certainly too long for (see StrideSampler.expect).
                self.sampler.expect(self.accepted * file_size // size)
            if line_no == 1 and raw.startswith(_UTF8_BOM):
                raw = raw[len(_UTF8_BOM):]
            if raw.isspace() or not raw:
                self.blank += 1
                continue
            try:
                record = parse(loads(raw))
            except decode_error as exc:
                self._reject(line_no, forms.NOT_JSON, f"not valid JSON ({exc})", raw)
                continue
            except line_error as exc:
                self._reject(line_no, exc.kind, exc.reason, raw)
                continue
            self._accept(record)
        self.size_bytes = size

    def _accept(self, record: forms.TrafficRecord) -> None:
        i = self.accepted
        self.accepted = i + 1
        self.forms[record.form] += 1
        # Counts the line carried are the common case: take them without a call.
        n_in, n_out = record.input_tokens, record.output_tokens
        if n_in is None or n_out is None:
            counter = self.counter
            est_in = est_out = False
            if n_in is None:
                n_in, est_in = counter.resolve(record.prompt_text, counter.input)
            if n_out is None:
                n_out, est_out = counter.resolve(record.completion_text, counter.output)
            if est_in or est_out:
                counter.estimated_records += 1
        self.append_input(n_in)  # never None: forms rejects a line with neither prompt text nor count
        if n_out is not None:
            self.append_output(n_out)
        if record.start_s is not None:
            self.append_start(record.start_s)
            self.append_latency(math.nan if record.latency_s is None else record.latency_s)
        if self.sampler.wants(i):
            if record.prompt_text or record.completion_text or record.uses_tools:
                label = content_mod.CLASS_CODE[content_mod.classify(record, n_in)]
            else:
                label = _NO_LABEL
            m = measure(record.prompt_text, record.completion_text)
            # The token count is kept only for an output measured whole: it is the tokens of those words.
            whole = m.output_words and n_out is not None and len(record.completion_text or "") <= TEXT_CAP_CHARS
            self.sampler.add(
                i,
                label,
                m.prompt,
                m.context,
                span_words=m.span_words,
                output_words=m.output_words or math.nan,
                output_tokens=n_out if whole and n_out is not None else math.nan,
            )

    def _reject(self, line_no: int, kind: str, reason: str, raw: bytes) -> None:
        self.rejected_by_kind[kind] = self.rejected_by_kind.get(kind, 0) + 1
        if len(self.examples) < MAX_REJECTED_EXAMPLES:
            text = raw[: REDACT_WINDOW_CHARS * 4].decode("utf-8", "replace")[:REDACT_WINDOW_CHARS].rstrip("\r\n")
            excerpt = cut(redact(text)[0], EXCERPT_CHARS)  # never half a placeholder
            self.examples.append(RejectedLine(line=line_no, kind=kind, reason=redact(reason)[0], excerpt=excerpt))

    def records(self, threshold: float) -> Records:
        rejected = sum(self.rejected_by_kind.values())
        seen = self.accepted + rejected
        return Records(
            accepted=self.accepted,
            rejected=rejected,
            blank_lines=self.blank,
            rejected_share=rejected / seen if seen else 0.0,
            reject_threshold=threshold,
            rejected_by_kind=dict(sorted(self.rejected_by_kind.items())),
            rejected_examples=self.examples,
            forms=self.forms,
        )


def _assemble(scan: _Scan, records: Records, path: str | os.PathLike[str],
              tokenizer_dir: str | os.PathLike[str] | None) -> Profile:
    counter = scan.counter
    in_stats = TokenStats(**stats.summarize(scan.inputs.as_numpy()))
    out_stats = TokenStats(**stats.summarize(scan.outputs.as_numpy()))
    conc = _concurrency(scan.starts.as_numpy(), scan.latencies.as_numpy())
    mix = _content_mix(scan.sampler)
    rep = _repetition(scan.sampler)
    fractions = None if mix.reason else {c: getattr(mix, c) for c in content_mod.CONTENT_CLASSES}
    evidence = Evidence(out_stats.p50, conc.mean, rep.mean, fractions)
    span_words, tokens_per_word = span_evidence(*(_floats(getattr(scan.sampler, name)) for name in (
        "span_words", "output_words", "output_tokens")))
    return Profile(
        source="traffic",
        input=InputInfo(path=str(path), sha256=scan.hasher.hexdigest(), size_bytes=scan.size_bytes, shapes=[]),
        records=records,
        token_counting=TokenCounting(
            tokenizer_dir=None if tokenizer_dir is None else str(Path(tokenizer_dir)),
            estimate_method=ESTIMATE_METHOD,
            estimated_records=counter.estimated_records,
            input=_sources(counter.input, scan.accepted),
            output=_sources(counter.output, scan.accepted),
        ),
        input_tokens=in_stats,
        output_tokens=out_stats,
        concurrency=conc,
        content_mix=mix,
        repetition=rep,
        sampling=Sampling(
            method=SAMPLING_METHOD,
            cap=scan.sampler.cap,
            stride=scan.sampler.stride,
            records_considered=scan.accepted,
            records_sampled=len(scan.sampler),
            sampled=len(scan.sampler) < scan.accepted,
        ),
        shapes=[],
        recommended_method=recommend(evidence),
        ngram_advice=advise(
            AdviceEvidence(rep.mean, rep.reason, span_words, tokens_per_word, out_stats.p50, conc.mean)
        ),
    )


def _floats(column: array[float]) -> np.ndarray:  # an array("d") of the sampler
    return np.frombuffer(column, dtype=np.float64) if len(column) else np.zeros(0)


def _sources(side: SideSources, accepted: int) -> CountSources:
    return CountSources(
        from_fields=side.from_fields(accepted),
        from_tokenizer=side.from_tokenizer,
        estimated=side.estimated,
        missing=side.missing,
    )


def _concurrency(starts: np.ndarray, latencies: np.ndarray) -> Concurrency:
    reasons: list[str] = []
    mean = peak = rate = span = None
    if starts.size == 0:
        reasons.append("no record carries a start time (timestamp or arrival_time)")
    else:
        rate, why = stats.arrival_rate(starts)
        if why:
            reasons.append(f"arrival rate: {why}")
        timed = ~np.isnan(latencies)
        if timed.any():
            mean, peak = stats.concurrency(starts[timed], latencies[timed])
            span = float((starts[timed] + latencies[timed]).max() - starts.min())
            span = max(span, float(starts.max() - starts.min()))
        else:
            reasons.append("no record carries a latency (latency_s or end_timestamp): concurrency unknown")
            span = float(starts.max() - starts.min())
    timed_count = int((~np.isnan(latencies)).sum()) if latencies.size else 0
    return Concurrency(
        records_with_times=timed_count,
        records_with_start=int(starts.size),
        mean=mean,
        max=peak,
        arrival_rate_per_s=rate,
        span_s=span,
        reason="; ".join(reasons) or None,
    )


def _content_mix(sampler: stats.StrideSampler) -> ContentMix:
    labels = np.frombuffer(sampler.label, dtype=np.int8) if len(sampler) else np.zeros(0, np.int8)
    labels = labels[labels != _NO_LABEL]
    if labels.size == 0:
        return _empty_mix("no sampled record carries text (count-only lines)", 0)
    counts = np.bincount(labels, minlength=len(content_mod.CONTENT_CLASSES))
    fractions = {c: float(n) / labels.size for c, n in zip(content_mod.CONTENT_CLASSES, counts, strict=True)}
    return ContentMix(**fractions, records_classified=int(labels.size), reason=None)


def _repetition(sampler: stats.StrideSampler) -> Repetition:
    values = np.frombuffer(sampler.reuse, dtype=np.float64) if len(sampler) else np.zeros(0)
    context = np.frombuffer(sampler.context_reuse, dtype=np.float64) if len(sampler) else np.zeros(0)
    measured = ~np.isnan(values)
    if not measured.any():
        return _empty_repetition(f"no sampled record has an output of {NGRAM_N} words or more", 0)
    v = values[measured]
    p50, p90 = (float(x) for x in np.percentile(v, [50.0, 90.0]))
    return Repetition(
        ngram_n=NGRAM_N,
        records_measured=int(v.size),
        mean=float(v.mean()),
        p50=p50,
        p90=p90,
        share_above_half=float((v >= 0.5).mean()),
        context_mean=float(context[measured].mean()),
        reason=None,
    )


def _empty_mix(reason: str, classified: int) -> ContentMix:
    return ContentMix(
        code=None, structured=None, math=None, chat=None, multilingual=None, agentic=None, rag=None,
        records_classified=classified, reason=reason,
    )


def _empty_repetition(reason: str, measured: int) -> Repetition:
    return Repetition(
        ngram_n=NGRAM_N, records_measured=measured, mean=None, p50=None, p90=None, share_above_half=None,
        context_mean=None, reason=reason,
    )
