"""KG answer scoring: F1 and exact match between answer sets, as AgentBench computes them."""

from __future__ import annotations

from collections.abc import Iterable


def answer_scores(predicted: Iterable[str], gold: Iterable[str]) -> dict[str, float | bool]:
    """Precision, recall, F1 and exact match of a predicted answer set against the gold set.

    With ``P`` the predicted set, ``G`` the gold set and ``TP = |P & G|``:
    ``precision = TP / |P|``, ``recall = TP / |G|``, ``F1 = 2 p r / (p + r)``, all 0 when
    ``TP = 0``; exact match when ``P == G``. Duplicates count once.

    Returns:
        ``{"precision", "recall", "f1", "exact_match"}``.
    """
    p, g = set(predicted), set(gold)
    tp = len(p & g)
    if tp == 0:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "exact_match": p == g}
    precision, recall = tp / len(p), tp / len(g)
    return {"precision": precision, "recall": recall, "f1": 2 * precision * recall / (precision + recall),
            "exact_match": p == g}
