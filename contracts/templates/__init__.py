"""Operator serve and bench templates that cannot drop a declared field.

The seed's path for a serving comparison is the operator's own serve and bench
argv. specdec records the declared serving config and load in every trial's
identity, so a template that never passes a declared field would make that
identity a claim nothing backs. Every part is pure (no I/O).

The parts, one module each; every public name is re-exported here, so
importers write `from contracts.templates import X` whichever module defines X:

- `values`: what fills a template. `serve_values` (the bench plan renders an
  operator serve command with it) and `bench_values` (the bench run renders
  an operator bench command per measured window), the placeholders each step
  fills (`SERVE_PLACEHOLDERS`, `BENCH_PLACEHOLDERS`) and `ENDPOINT_PATHS`.
  Flag placeholders (`{..._flag}`, contracts/argv.py) render one complete
  token or drop their item.
- `carriers`: how a template carries a field (`Carrier`, the tables
  `SERVE_CARRIERS` and `BENCH_CARRIERS`) and what a cell declares
  (`Declared`, from `serve_declared` and `bench_declared`).
- `check`: what `specdec submit` refuses, every problem at once
  (`template_problems`, over `field_problems`, `unfilled`, `load_problems`,
  `literals`, `options`, `serve_template`, `bench_template`, `Problem`):
  * a serve template (`commands.serve.argv`, or a cell's
    `vllm_sweep.serve_cmd`) that carries neither a placeholder nor an agreeing
    literal flag for a serving field the cell declares (`SERVE_CARRIERS`);
  * a bench template (`commands.bench.argv`, or a cell's `vllm_sweep.bench_cmd`)
    that does not carry a load field whose value is not the neutral one, or
    one of the items every operator bench must get (`BENCH_CARRIERS`);
  * a literal flag whose value is not the declared one (even where the field
    need not be carried: the identity would lie);
  * a value placeholder of an unset field (`{max_num_seqs}` without
    `serving.max_num_seqs`): it has nothing to render;
  * a placeholder the step does not fill (`{corpus}` in a serve command);
  * cells whose bench commands imply different loads.

Imports run one way: `carriers` uses `values`, `check` uses both.

These checks do not replace the bench-runner's read-back of the engine's
effective config: an operator's wrapper can still receive a flag and drop it.
docs/configuration.md ("Operator argv templates") is the operator's table.
"""

from __future__ import annotations

from contracts.templates.carriers import (
    BENCH_CARRIERS,
    SERVE_CARRIERS,
    Carrier,
    Declared,
    bench_declared,
    serve_declared,
)
from contracts.templates.check import (
    Problem,
    bench_template,
    field_problems,
    literals,
    load_problems,
    options,
    serve_template,
    template_problems,
    unfilled,
)
from contracts.templates.values import (
    BENCH_PLACEHOLDERS,
    ENDPOINT_PATHS,
    SERVE_PLACEHOLDERS,
    bench_values,
    serve_values,
)

__all__ = [
    "BENCH_CARRIERS",
    "BENCH_PLACEHOLDERS",
    "ENDPOINT_PATHS",
    "SERVE_CARRIERS",
    "SERVE_PLACEHOLDERS",
    "Carrier",
    "Declared",
    "Problem",
    "bench_declared",
    "bench_template",
    "bench_values",
    "field_problems",
    "literals",
    "load_problems",
    "options",
    "serve_declared",
    "serve_template",
    "serve_values",
    "template_problems",
    "unfilled",
]
