"""Turn an env's ``info`` (or any value) into JSON-safe data, generically.

The server sends ``info`` over the wire without knowing its keys, so a new key, a key whose
type differs between steps (the envs' own keys keep one type; a wrapper's need not) or a new
value type does not break it. pydantic_core's serializer does the conversion (``to_json``,
read back with ``json.loads``, so the result is JSON by construction); what it does not
know goes through a fallback. Conversions:

| value | becomes |
|---|---|
| ``None``, ``bool``, ``int``, ``str`` | itself |
| ``float`` | itself; NaN and infinities become None (JSON has neither) |
| an ``Enum`` | its ``value``, converted again |
| a pydantic model | its JSON form (``model_dump(mode="json")``) |
| a dataclass instance | its fields |
| a numpy scalar / array | ``item()`` / ``tolist()`` |
| ``dict`` (any mapping) | a dict with ``str`` keys |
| ``list``, ``tuple``, ``set``, ``frozenset`` | a list (a set's in its iteration order) |
| ``bytes`` | text, undecodable bytes replaced |
| ``Path``, ``datetime``, ``UUID``... | pydantic's JSON form (a path's text, ISO 8601 times) |
| anything else | ``str(value)`` |

A value pydantic_core refuses as a whole (a cycle, bytes that are not UTF-8) is converted
part by part, so only the part at fault degrades (a cycle is cut at a depth of 64).

Example::

    >>> import enum
    >>> class Colour(enum.Enum):
    ...     RED = "red"
    >>> to_jsonable({"c": Colour.RED, "t": (1, 2.5), "n": float("nan")})
    {'c': 'red', 't': [1, 2.5], 'n': None}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pydantic_core

__all__ = ["to_jsonable"]

_MAX_DEPTH = 64
"""Deeper structures are cut (their innermost values become strings): a cycle must not recurse forever."""


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as nested dicts, lists, strings, numbers, booleans and None (see the module table)."""
    try:
        text = pydantic_core.to_json(value, fallback=_unknown)
    except ValueError:  # PydanticSerializationError (a cycle) and UnicodeDecodeError are ValueErrors
        return _by_parts(value, _depth)
    # NaN and infinities: None whichever way this pydantic_core writes them (null, or JSON5's constants).
    return json.loads(text, parse_constant=lambda _: None)


def _unknown(value: Any) -> Any:
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    return str(value)


def _by_parts(value: Any, depth: int) -> Any:
    if depth >= _MAX_DEPTH:
        return str(value)
    deeper = depth + 1
    if isinstance(value, Mapping):
        return {str(to_jsonable(k, deeper)): to_jsonable(v, deeper) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v, deeper) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)
