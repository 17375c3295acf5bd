"""Passes when both texts are non-empty and one contains the other (stripped)."""

from __future__ import annotations

import sys


def matches(answer: str, reference: str) -> bool:
    got, want = answer.strip(), reference.strip()
    return bool(got and want and (got in want or want in got))


if __name__ == "__main__":
    sys.exit(0 if matches(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "") else 1)
