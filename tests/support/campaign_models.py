"""Campaign models changed for a test: a field added, a validator dropped.

- `variant_of` builds a subclass of the campaign contract with a nested model
  swapped (a LoadSpec with one more field: the campaign as it would be with a
  field added); `in_place` puts it where every module that imported `Campaign`
  reads it, so `specdec submit`'s validation and each step's `campaign.json`
  reader use it.
- `dropped` lets one of a contract model's validators pass everything, in every
  model that embeds it (the contract as it was before a fix added the check),
  and puts it back afterwards.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import Field

from contracts import campaign as contract


def _keep_model(self: Any) -> Any:
    return self


@classmethod  # type: ignore[misc]  # outside a class on purpose: without() sets it on one
def _keep_value(cls: Any, value: Any) -> Any:
    return value


def without(model: type, *validators: str, **fields: Any) -> type:
    """A subclass of `model` whose named validators let everything through, with `fields`
    added (name -> (annotation, pydantic Field)). Pydantic keeps a validator's mode for a
    method overridden under its name, so each is replaced by a no-op of its own kind."""
    decorators = model.__pydantic_decorators__  # type: ignore[attr-defined]  # `model` is a pydantic model
    namespace: dict[str, Any] = {}
    for name in validators:
        if name in decorators.field_validators:
            namespace[name] = _keep_value
        elif name in decorators.model_validators:
            namespace[name] = _keep_model
        else:
            raise AssertionError(f"{model.__name__} has no validator {name}")
    namespace["__annotations__"] = {name: spec[0] for name, spec in fields.items()}
    namespace.update({name: spec[1] for name, spec in fields.items()})
    namespace["__module__"] = __name__
    return type(model.__name__, (model,), namespace)


def variant_of(*, load: type | None = None, gate: type | None = None, drop: tuple[str, ...] = ()) -> type:
    """A Campaign whose matrix.load is `load` and whose gate is `gate`, its own `drop` validators dropped."""
    fields: dict[str, Any] = {}
    if load is not None:
        matrix = without(contract.Matrix, load=(load, Field(default_factory=load, description="The measured load.")))
        fields["matrix"] = (matrix | contract.MatrixFile, Field(description="The cells, inline or as a path."))
    if gate is not None:
        fields["gate"] = (gate, Field(description="Objective and floors."))
    return without(contract.Campaign, *drop, **fields)


def _holders(value: type) -> list[Any]:
    return [module for module in list(sys.modules.values())
            if (getattr(module, "__name__", "") or "").split(".")[0] in ("contracts", "services", "tests")
            and getattr(module, "Campaign", None) is value]


@contextmanager
def in_place(model: type) -> Iterator[None]:
    """`model` wherever a module holds the real Campaign (contracts, services, tests), and
    in any module first imported meanwhile; the real one everywhere again afterwards."""
    real = contract.Campaign
    for module in _holders(real):
        module.Campaign = model
    try:
        yield
    finally:
        for module in _holders(model):
            module.Campaign = real


@contextmanager
def dropped(model: type, *validators: str) -> Iterator[None]:
    """The named validators of `model` accept everything, wherever the model is validated
    (pydantic compiled each into every schema that embeds the model, so the function's code
    is swapped rather than the class attribute)."""
    decorators = model.__pydantic_decorators__  # type: ignore[attr-defined]  # `model` is a pydantic model
    swapped = []
    for name in validators:
        if name in decorators.field_validators:
            func = decorators.field_validators[name].func
            keep = _keep_value.__func__  # type: ignore[attr-defined]  # a classmethod: its function
        elif name in decorators.model_validators:
            func, keep = decorators.model_validators[name].func, _keep_model
        else:
            raise AssertionError(f"{model.__name__} has no validator {name}")
        func = getattr(func, "__func__", func)
        swapped.append((func, func.__code__))
        func.__code__ = keep.__code__
    try:
        yield
    finally:
        for func, code in swapped:
            func.__code__ = code
