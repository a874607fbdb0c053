"""A window whose chunks the client read in bursts: its timing measures the client, not the server.

vLLM writes one streamed chunk per engine step per request (several steps' tokens in
one chunk when it falls behind). A request whose chunks all reach the client within
BURST_S of one another, though the server wrote MIN_CHUNKS of them or more, was not
read as it streamed: MIN_CHUNKS engine steps cannot run in a millisecond (each costs
milliseconds of scheduling alone, on any hardware vLLM runs on), so the client, or
something between it and the server, held them back and read them at once. Its TTFT
then comes out late and its TPOT near 0 (first and last token read together).

Seen on the development machines in the fidelity benchmark (tests/perf/loadgen_fidelity.py):
windows with median TPOT 0 and TTFT 200-380 ms beside vLLM's client's 20 ms on the
same server, in 4 of 12 of specdec's windows there, while its harness started the
server in a session of its own (docs/bench-runner.md, "Burst delivery"); never in
the bench-runner's own campaigns that day. Counted as it is, such a window would read as a TPOT win for
whichever arm it hit. The bench-runner measures such a window again (services/bench/trial.py)
and fails the cell, naming this, when it keeps happening; every stalled window is kept
in the bundle.
"""

from __future__ import annotations

from services.bench.loadgen.timing import RequestRecord

BURST_S = 0.001
MIN_CHUNKS = 4
# A window is stalled when more than this share of its requests that streamed at least
# MIN_CHUNKS chunks were read in one burst.
MAX_BURST_SHARE = 0.25


def read_in_one_burst(request: RequestRecord) -> bool:
    """True when a request of MIN_CHUNKS chunks or more had all of them read within BURST_S."""
    times = request.chunk_arrival_s
    return len(times) >= MIN_CHUNKS and times[-1] - times[0] < BURST_S


def client_stall(requests: list[RequestRecord]) -> str | None:
    """Why a window's timing measures its client, in words; None when it does not."""
    streamed = [r for r in requests if len(r.chunk_arrival_s) >= MIN_CHUNKS]
    if not streamed:
        return None
    burst = [r for r in streamed if read_in_one_burst(r)]
    if len(burst) <= MAX_BURST_SHARE * len(streamed):
        return None
    return (f"{len(burst)} of {len(streamed)} requests that streamed {MIN_CHUNKS} chunks or more had every chunk read "
            f"within {BURST_S * 1e3:g} ms (the server wrote them over separate engine steps): the client read them "
            "in bursts, so this window's TTFT, TPOT and ITL time the client, not the server")
