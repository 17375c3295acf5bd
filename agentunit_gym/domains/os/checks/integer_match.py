"""Passes when both texts are the same integer (surrounding whitespace ignored)."""

from __future__ import annotations

import sys


def _as_int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def matches(answer: str, reference: str) -> bool:
    got, want = _as_int(answer), _as_int(reference)
    return got is not None and got == want


if __name__ == "__main__":
    sys.exit(0 if matches(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "") else 1)
