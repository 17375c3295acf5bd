from __future__ import annotations

import pytest

from agentunit_gym.domains.db.metrics import accuracy_by_family, db_headline
from agentunit_gym.domains.db.scoring import (
    answers_match,
    normalize_value,
    parse_answer_md5,
    parse_final_answer,
    values_equal,
)
from agentunit_gym.errors import ConfigError


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Lyon ", "Lyon"),
        ("'Lyon'", "Lyon"),
        ('" Lyon "', "Lyon"),
        ("`x`", "x"),
        ("'\"nested\"'", "nested"),
        ("45%", "45"),
        ("45 %", "45"),
        ("1,234", "1234"),
        ("-12,345,678.5", "-12345678.5"),
        ("1,23", "1,23"),  # not a thousands pattern: kept
        ("a,b", "a,b"),
        (3.5, "3.5"),
        (None, "None"),
        ("'", "'"),  # a lone quote is not a pair
    ],
)
def test_normalize_value(raw: object, expected: str) -> None:
    assert normalize_value(raw) == expected


def test_single_values_numeric_tolerance_and_strings() -> None:
    assert values_equal("3", "3.0")
    assert values_equal("29.86", 29.855)  # within 0.01
    assert values_equal("10.00", "10.01")
    assert not values_equal("10.00", "10.02")
    assert values_equal("1,234.5", "1234.5")
    assert values_equal("50%", "50")
    assert not values_equal("Lyon", "lyon")  # strings compare case-sensitively, as in AgentBench
    # Non-finite values are not numbers to compare: they fall back to text.
    assert values_equal("nan", "'nan'")
    assert not values_equal("inf", "1e999")
    assert not values_equal("3", "three")


def test_several_values_compare_as_sets() -> None:
    assert answers_match(["b", "a"], ["a", "b"])
    assert answers_match(["a", "a", "b"], ["b", "a"])  # duplicates collapse, as sets
    assert not answers_match(["a"], ["a", "b"])
    assert not answers_match(["a", "b", "c"], ["a", "b"])
    assert answers_match(["1.004", "2"], ["2.0", "1"])  # numbers pair within tolerance
    assert not answers_match(["1.5", "2"], ["2", "1"])
    assert answers_match([], [])
    assert not answers_match([], ["x"])
    assert answers_match(["'Lyon'"], ["Lyon"])


def test_parse_final_answer_forms() -> None:
    assert parse_final_answer('["a", "b"]') == ["a", "b"]
    assert parse_final_answer("['a', 2, 3.5]") == ["a", "2", "3.5"]
    assert parse_final_answer("[('x',), ('y',)]") == ["x", "y"]  # a pasted fetchall
    assert parse_final_answer("[]") == []
    assert parse_final_answer("") == []
    assert parse_final_answer("42") == ["42"]
    assert parse_final_answer('"Lyon"') == ["Lyon"]
    assert parse_final_answer("Lyon") == ["Lyon"]
    assert parse_final_answer("1,234") == ["1,234"]  # not a tuple: one value
    assert parse_final_answer("[Lyon, Porto]") == ["Lyon", "Porto"]
    assert parse_final_answer("[New York City]") == ["New York City"]


def test_parse_answer_md5() -> None:
    digest = "0123456789abcdef0123456789ABCDEF"
    assert parse_answer_md5(f"[('{digest}',)]") == digest.lower()
    assert parse_answer_md5(f'[("{digest}",)]') == digest.lower()
    assert parse_answer_md5(digest) == digest.lower()
    assert parse_answer_md5("[(None,)]") == ""  # MySQL's hash of an empty table
    with pytest.raises(ConfigError):
        parse_answer_md5("[('short',)]")


def test_accuracy_by_family_and_headline() -> None:
    episodes = [
        {"type": "counting", "success": True},
        {"type": "ranking", "success": False},
        {"type": "aggregation-SUM", "success": True},
        {"type": "aggregation-MAX", "success": True},
        {"type": "INSERT", "success": True},
        {"type": "INSERT", "success": False},
        {"type": "UPDATE", "success": False},
        {"type": "DELETE", "success": True},
    ]
    acc = accuracy_by_family(episodes)
    assert acc == {"SELECT": 0.75, "INSERT": 0.5, "UPDATE": 0.0, "DELETE": 1.0}
    # DELETE is reported but not part of the headline: (0.75 + 0.5 + 0.0) / 3.
    assert db_headline(acc) == pytest.approx(1.25 / 3)
    with pytest.raises(ConfigError, match="UPDATE"):
        db_headline({"SELECT": 1.0, "INSERT": 1.0}, require_all=True)
    # Without require_all (the evaluator's summary), the families present are averaged.
    assert db_headline({"SELECT": 1.0, "INSERT": 0.5}) == pytest.approx(0.75)
    assert db_headline({"DELETE": 1.0}) is None
