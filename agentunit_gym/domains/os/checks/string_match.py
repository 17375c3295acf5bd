"""Passes when both texts are equal after normalising line ends and stripping."""

from __future__ import annotations

import sys


def _norm(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def matches(answer: str, reference: str) -> bool:
    return _norm(answer) == _norm(reference)


if __name__ == "__main__":
    sys.exit(0 if matches(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "") else 1)
