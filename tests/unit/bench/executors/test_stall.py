"""services.bench.executors.stall: which windows were read in bursts by their client."""

from __future__ import annotations

from services.bench.executors.stall import BURST_S, MIN_CHUNKS, client_stall, read_in_one_burst
from services.bench.loadgen.timing import RequestRecord


def request(times: list[float], index: int = 0) -> RequestRecord:
    return RequestRecord(
        index=index,
        prompt_id=f"p{index}",
        scheduled_s=0.0,
        start_s=0.0,
        end_s=(times or [0.0])[-1],
        chunk_arrival_s=times,
        chunk_tokens=[1] * len(times),
        output_tokens=len(times),
        prompt_tokens=3,
        status_code=200,
        error_kind=None,
        error=None,
        finish_reason="length",
        text="a",
    )


def streamed(index: int = 0) -> RequestRecord:
    return request([0.02 + 0.005 * i for i in range(8)], index)  # a chunk every 5 ms


def burst(index: int = 0) -> RequestRecord:
    return request([0.3] * 8, index)  # every chunk read at one instant


def test_a_request_is_a_burst_only_with_enough_chunks_all_within_the_burst_span():
    assert read_in_one_burst(burst())
    assert not read_in_one_burst(streamed())
    assert not read_in_one_burst(request([0.3] * (MIN_CHUNKS - 1)))  # too few chunks to tell
    assert read_in_one_burst(request([0.3 + i * BURST_S / 10 for i in range(MIN_CHUNKS)]))
    assert not read_in_one_burst(request([0.3 + i * BURST_S for i in range(MIN_CHUNKS)]))


def test_a_window_stalls_when_more_than_a_quarter_of_its_streamed_requests_were_bursts():
    assert client_stall([streamed(i) for i in range(8)]) is None
    assert client_stall([burst(0), burst(1)] + [streamed(i) for i in range(2, 8)]) is None  # 2 of 8: a quarter
    why = client_stall([burst(0), burst(1), burst(2)] + [streamed(i) for i in range(3, 8)])
    assert why is not None and why.startswith("3 of 8 requests that streamed 4 chunks or more")
    # Requests too short to tell are neither counted nor held against the window.
    assert client_stall([request([0.1]), request([0.1, 0.1])]) is None
    assert client_stall([burst(0), request([0.1, 0.1])]) is not None
