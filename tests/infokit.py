"""A runtime check of an ``info`` dict against its TypedDict (core/info.py, wrappers/keys.py, eval/agents/info.py):
every required key present, no undeclared key, every value of its declared type. The tests of
the wrappers' and the evaluator's ``info`` share it."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints


def conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the type ``hint`` names (the typing forms the info modules use)."""
    if hint is Any:
        return True
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(conforms(value, h) for h in get_args(hint))
    if origin is Literal:
        return value in get_args(hint)
    if origin is dict:
        key_hint, value_hint = get_args(hint)
        return isinstance(value, dict) and all(conforms(k, key_hint) and conforms(v, value_hint)
                                               for k, v in value.items())
    if origin is list:
        (item_hint,) = get_args(hint)
        return isinstance(value, list) and all(conforms(v, item_hint) for v in value)
    if isinstance(hint, type) and hasattr(hint, "__required_keys__"):  # a TypedDict
        return mismatches(value, hint) == []
    if hint is float:
        return type(value) in (float, int)
    if hint is type(None):
        return value is None
    return isinstance(value, hint) and not (hint is int and isinstance(value, bool))


def mismatches(info: Any, shape: Any) -> list[str]:
    """What is wrong with ``info`` as a ``shape`` (a TypedDict): missing or undeclared keys, bad values."""
    if not isinstance(info, dict):
        return [f"not a dict: {info!r}"]
    hints = get_type_hints(shape)
    problems = [f"missing {k}" for k in shape.__required_keys__ if k not in info]
    problems += [f"undeclared {k}" for k in info if k not in hints]
    problems += [f"{k}={info[k]!r} is not {hints[k]}" for k in info if k in hints and not conforms(info[k], hints[k])]
    return problems
