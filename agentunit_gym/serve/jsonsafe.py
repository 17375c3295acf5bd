"""Turn an env's ``info`` (or any value) into JSON-safe data, generically.

The server sends ``info`` over the wire without knowing its keys, so a new key, a key whose
type differs between steps (the envs' own keys keep one type; a wrapper's need not) or a new
value type does not break it. Conversions:

| value | becomes |
|---|---|
| ``None``, ``bool``, ``int``, ``str`` | itself |
| ``float`` | itself; NaN and infinities become None (JSON has neither) |
| an ``Enum`` | its ``value``, converted again |
| a pydantic model | ``model_dump(mode="json")`` |
| a dataclass instance | its ``to_dict()`` when it has one, else its fields |
| a numpy scalar / array | ``item()`` / ``tolist()`` |
| ``dict`` (any mapping) | a dict with ``str`` keys |
| ``list``, ``tuple``, ``set``, ``frozenset`` | a list (a set sorted when its items sort) |
| ``bytes`` | text, undecodable bytes replaced |
| ``Path``, ``datetime``, anything else | ``str(value)`` |

Example::

    >>> import enum
    >>> class Colour(enum.Enum):
    ...     RED = "red"
    >>> to_jsonable({"c": Colour.RED, "t": (1, 2.5), "n": float("nan")})
    {'c': 'red', 't': [1, 2.5], 'n': None}
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel

__all__ = ["to_jsonable"]

_MAX_DEPTH = 64
"""Deeper structures are cut (their innermost values become strings): a cycle must not recurse forever."""


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as nested dicts, lists, strings, numbers, booleans and None (see the module table)."""
    if value is None or isinstance(value, (bool, int, str)) and not isinstance(value, enum.Enum):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if _depth >= _MAX_DEPTH:
        return str(value)
    deeper = _depth + 1
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, deeper)
    if isinstance(value, BaseModel):
        return to_jsonable(value.model_dump(mode="json"), deeper)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict):
            return to_jsonable(to_dict(), deeper)
        return {f.name: to_jsonable(getattr(value, f.name), deeper) for f in dataclasses.fields(value)}
    if isinstance(value, np.generic):
        return to_jsonable(value.item(), deeper)
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist(), deeper)
    if isinstance(value, Mapping):
        return {str(to_jsonable(k, deeper)): to_jsonable(v, deeper) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, deeper) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_jsonable(v, deeper) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)
