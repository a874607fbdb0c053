"""specdec's benchmarks: `python -m tests.perf.runner` runs every `bench_*.py` here (see docs/perf.md)."""
