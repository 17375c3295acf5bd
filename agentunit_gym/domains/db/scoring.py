"""Grading of DB episodes with AgentBench's semantics, and the DB headline metric.

SELECT family: the agent's final answer is parsed into a list of values and compared with
the gold list. With one value on each side they compare as numbers (absolute tolerance
0.01) when both parse as numbers, else as strings; with several values they compare as
sets. Values are normalised first: surrounding whitespace and quotes are stripped, a
trailing ``%`` and thousands separators are dropped. String comparison stays
case-sensitive, as in AgentBench.

INSERT / UPDATE / DELETE: graded by AgentBench's table hash (see
:meth:`agentunit_gym.backends.sql.base.EpisodeDatabase.table_hash`): the agent's table must
hash like the expected one.

The headline over many episodes lives in :mod:`agentunit_gym.domains.db.metrics`.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from agentunit_gym.errors import ConfigError

NUMERIC_TOLERANCE = 0.01
"""Absolute tolerance when both single values parse as numbers."""

_QUOTES = "'\"`"
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$")
_HASH_REPR = re.compile(r"^\s*\[\s*\(\s*['\"]([0-9a-fA-F]{32})['\"]\s*,?\s*\)\s*,?\s*\]\s*$")
_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")


def normalize_value(value: Any) -> str:
    """Normalise one answer value for comparison.

    Args:
        value: a cell or an answer item (any type; None becomes ``"None"`` as AgentBench's
            ``str()`` would).

    Returns:
        The value as text without surrounding whitespace and quotes, a trailing ``%``, or
        thousands separators (``"1,234.5"`` becomes ``"1234.5"``).
    """
    text = str(value).strip()
    # Quotes may nest with spaces inside: '" Lyon "' -> Lyon.
    while len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    if text.endswith("%"):
        text = text[:-1].strip()
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    return text


def as_number(text: str) -> float | None:
    """The value as a finite float, or None when it is not a number."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def values_equal(given: Any, gold: Any) -> bool:
    """Compare two single values: numbers within :data:`NUMERIC_TOLERANCE`, else normalised text."""
    a, b = normalize_value(given), normalize_value(gold)
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return abs(x - y) <= NUMERIC_TOLERANCE + 1e-9
    return a == b


def _flatten(items: Iterable[Any]) -> list[str]:
    # A fetchall pasted as the answer ([('a',), ('b',)]) counts as its cells.
    out: list[str] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(_flatten(item))
        else:
            out.append(str(item))
    return out


def parse_final_answer(text: str) -> list[str]:
    """Parse the text after ``Final Answer:`` (or a tool call's string answer) into values.

    ``["a", "b"]`` and ``[1, 2.5]`` (JSON or Python literals, nested tuples flattened) give
    their items; a bracketed list that is neither (``[a, b]``) is split on commas; anything
    else is one value. ``[]`` is the empty answer (what agents send after a modification).

    Args:
        text: the answer text.

    Returns:
        The values as strings, not yet normalised.
    """
    stripped = text.strip()
    if not stripped:
        return []
    for loader in (json.loads, ast.literal_eval):
        try:
            parsed = loader(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(parsed, (list, tuple, set)):
            if not stripped.startswith(("[", "(")):
                break  # "1,234" reads as a tuple in Python: without brackets it is one value
            return _flatten(parsed)
        return [str(parsed)]
    if stripped.startswith("[") and stripped.endswith("]"):
        inner = stripped[1:-1].strip()
        return [part for part in (p.strip() for p in inner.split(",")) if part] if inner else []
    return [stripped]


def answers_match(given: Sequence[Any], gold: Sequence[Any]) -> bool:
    """AgentBench's answer comparison.

    Args:
        given: the agent's values.
        gold: the task's values.

    Returns:
        One value each: :func:`values_equal`. Otherwise both, as sets of normalised values,
        hold the same elements (numbers pair within the tolerance).
    """
    if len(given) == 1 and len(gold) == 1:
        return values_equal(given[0], gold[0])
    left = list(dict.fromkeys(normalize_value(v) for v in given))
    right = list(dict.fromkeys(normalize_value(v) for v in gold))
    if len(left) != len(right):
        return False
    # Pair greedily: exact text first, then numeric within tolerance. Gold sets are small.
    remaining = list(right)
    for value in sorted(left, key=lambda v: v not in remaining):
        if value in remaining:
            remaining.remove(value)
            continue
        match = next((r for r in remaining if values_equal(value, r)), None)
        if match is None:
            return False
        remaining.remove(match)
    return True


def answer_f1(given: Sequence[Any], gold: Sequence[Any]) -> float:
    """How much of the gold answer a given answer holds: F1 of the two sets of normalised
    values, a value pairing with one gold value as in :func:`answers_match`.

    ``precision = paired / |given|``, ``recall = paired / |gold|``, ``F1 = 2PR / (P + R)``
    (0 when nothing pairs). 1.0 whenever :func:`answers_match` holds; partial credit for
    shaped rewards otherwise (``agentunit_gym.wrappers.rewards.partial_credit``).
    """
    if answers_match(given, gold):
        return 1.0
    left = list(dict.fromkeys(normalize_value(v) for v in given))
    remaining = list(dict.fromkeys(normalize_value(v) for v in gold))
    if not left or not remaining:
        return 0.0
    size_given, size_gold = len(left), len(remaining)
    paired = 0
    for value in left:
        match = next((r for r in remaining if r == value or values_equal(value, r)), None)
        if match is not None:
            remaining.remove(match)
            paired += 1
    if paired == 0:
        return 0.0
    precision, recall = paired / size_given, paired / size_gold
    return 2 * precision * recall / (precision + recall)


def parse_answer_md5(text: str) -> str:
    """The hex digest from an ``answer_md5`` field: a bare digest or AgentBench's ``"[('<hex>',)]"``.

    ``"[(None,)]"`` (MySQL's hash of a table with no rows) maps to ``""``, which is what
    ``EpisodeDatabase.table_hash`` returns for an empty table.

    Raises:
        ConfigError: neither form.
    """
    stripped = text.strip()
    if re.fullmatch(r"\[\(\s*None\s*,?\s*\)\]", stripped):
        return ""
    if _HEX32.match(stripped):
        return stripped.lower()
    match = _HASH_REPR.match(stripped)
    if match is None:
        raise ConfigError(
            f"answer_md5 must be a 32-digit hex digest or \"[('<digest>',)]\", got {text[:80]!r}."
        )
    return match.group(1).lower()
