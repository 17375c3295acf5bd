"""Passes when both texts are the same size in bytes (``1536``, ``1.5K``, ``1.5 KiB``; units up to P)."""

from __future__ import annotations

import re
import sys

_UNITS = "BKMGTP"


def _as_bytes(text: str) -> float | None:
    found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([BKMGTP]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if found is None:
        return None
    unit = found.group(2).upper() or "B"
    return float(found.group(1)) * (1 << (10 * _UNITS.index(unit)))


def matches(answer: str, reference: str) -> bool:
    got, want = _as_bytes(answer), _as_bytes(reference)
    return got is not None and want is not None and abs(got - want) < 0.5


if __name__ == "__main__":
    sys.exit(0 if matches(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "") else 1)
