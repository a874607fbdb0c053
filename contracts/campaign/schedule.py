"""A k per batch size: vLLM's `num_speculative_tokens_per_batch_size`, as a cell declares it.

The schedule is a list of `[start_bs, end_bs, k]` entries: inclusive batch-size
ranges, non-overlapping, in ascending order, the first starting at 1, each k
between 0 and the cell's `num_speculative_tokens` (its maximum). vLLM 0.32.0
(`vllm/v1/spec_decode/dynamic/utils.py`) looks the k of a scheduler step up by
the step's batch size (the requests scheduled in it): a gap between ranges
takes the previous range's k, and batch sizes past the last range take the
last k; every k is capped at num_speculative_tokens. `k_at` is that lookup.

vLLM itself accepts unsorted entries and k above the maximum (it sorts and
caps); specdec refuses both, so that what a cell declares is what runs.

Pure: no I/O, no vLLM import.
"""

from __future__ import annotations

from collections.abc import Sequence

Entry = tuple[int, int, int]


def schedule_problems(entries: Sequence[Sequence[int]], k_max: int) -> list[str]:
    """Why `entries` is not a schedule for a cell with num_speculative_tokens `k_max`; [] when it is."""
    if not entries:
        return ["the schedule is empty: give at least one [start_bs, end_bs, k] entry, the first starting at 1"]
    problems = []
    previous_end = 0
    for index, entry in enumerate(entries):
        if len(entry) != 3:
            problems.append(f"entry {index} {list(entry)} is not [start_bs, end_bs, k]")
            continue
        start, end, k = entry
        if index == 0 and start != 1:
            problems.append(f"the first range starts at {start}: it must start at batch size 1, so every batch "
                            "size has a k")
        if start > end:
            problems.append(f"entry {index} [{start}, {end}, {k}]: start_bs exceeds end_bs")
        elif index and start <= previous_end:
            problems.append(f"entry {index} [{start}, {end}, {k}] overlaps or precedes the range ending at "
                            f"{previous_end}: ranges are inclusive, non-overlapping and ascending")
        if not 0 <= k <= k_max:
            problems.append(f"entry {index} [{start}, {end}, {k}]: k must lie between 0 and "
                            f"num_speculative_tokens {k_max}")
        previous_end = max(previous_end, end)
    return problems


def k_at(entries: Sequence[Sequence[int]], k_max: int, batch_size: int) -> int:
    """The k vLLM runs a step of `batch_size` requests with (a gap or the tail carries the previous k)."""
    k = entries[0][2]
    for start, _, value in entries:
        if start > batch_size:
            break
        k = value
    return min(k, k_max)


def k_span(entries: Sequence[Sequence[int]], k_max: int, concurrency: int | None) -> tuple[int, int]:
    """(fewest, most) tokens per draft over the batch sizes a window at `concurrency` can schedule: 1 up to
    the concurrency (ramping up and draining, a window's steps run every batch size below its cap);
    None, no cap: every batch size."""
    sizes = {1} | {int(start) for start, _, _ in entries}
    if concurrency is not None:
        sizes = {s for s in sizes if s <= concurrency}
    ks = [k_at(entries, k_max, size) for size in sizes]
    return min(ks), max(ks)
