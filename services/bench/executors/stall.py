"""A window whose chunks the client read in bursts: its timing measures the client, not the server.

vLLM writes one chunk per engine step per request, and MIN_CHUNKS engine steps cannot run within BURST_S:
a request whose chunks all arrived that close together was held back on its way and read at once (TTFT
late, TPOT near 0). Counted, such a window would read as a TPOT win for whichever arm it hit, so it is
measured again, never counted (docs/bench-runner.md#measurement-process)."""

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
