"""``to_jsonable``: any info value becomes JSON, whatever its keys and types."""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from agentunit_gym.core.env import StepTiming
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.serve.jsonsafe import to_jsonable


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: tuple[float, ...]


class Model(BaseModel):
    name: str
    where: Path


def test_the_module_table() -> None:
    value = {
        "reason": FinishReason.COMPLETE, "colour": Colour.RED, "timing": StepTiming(0.25),
        "point": Point(1, (2.0, float("inf"))), "model": Model(name="m", where=Path("/tmp/x")),
        "np": {"i": np.int64(3), "f": np.float32(0.5), "b": np.bool_(True), "a": np.arange(3)},
        "set": {3, 1, 2}, "mixed": {1, "a"}, "bytes": b"\xffok", 7: "int key", "nan": float("nan"),
        "nested": [(1, None), {"deep": [Colour.RED]}],
    }
    out = to_jsonable(value)
    assert out["reason"] == "complete" and out["colour"] == "red"
    assert out["timing"] == {"env_s": 0.25}
    assert out["point"] == {"x": 1, "y": [2.0, None]}
    assert out["model"] == {"name": "m", "where": "/tmp/x"}
    assert out["np"] == {"i": 3, "f": 0.5, "b": True, "a": [0, 1, 2]}
    assert type(out["np"]["i"]) is int and type(out["np"]["b"]) is bool
    assert out["set"] == [1, 2, 3] and sorted(map(str, out["mixed"])) == ["1", "a"]
    assert out["bytes"] == "\ufffdok" and out["7"] == "int key" and out["nan"] is None
    assert out["nested"] == [[1, None], {"deep": ["red"]}]
    assert json.loads(json.dumps(out, allow_nan=False)) == out


def test_info_keys_that_change_type_between_steps_pass_unchanged() -> None:
    # Today info["action"] is None after an invalid reply and a dict after a valid one; a
    # vector-safe info may make it a dict always. Either shape goes through as it is.
    assert to_jsonable({"action": None}) == {"action": None}
    assert to_jsonable({"action": {"tool": "x", "arguments": {}}}) == {"action": {"tool": "x", "arguments": {}}}
    assert to_jsonable({"action": {"tool": "", "valid": False}}) == {"action": {"tool": "", "valid": False}}


def test_a_cycle_does_not_recurse_forever() -> None:
    loop: list[object] = []
    loop.append(loop)
    out = to_jsonable(loop)
    json.dumps(out)


class Scored(BaseModel):
    score: float


def test_nan_becomes_none_wherever_it_sits() -> None:
    value = {"model": Scored(score=float("nan")), "array": np.array([1.0, np.nan, -np.inf]),
             "scalar": np.float64("inf"), "list": [float("-inf")]}
    assert to_jsonable(value) == {"model": {"score": None}, "array": [1.0, None, None], "scalar": None,
                                  "list": [None]}


def test_only_the_part_at_fault_degrades() -> None:
    loop: list[object] = []
    loop.append(loop)
    out = to_jsonable({"bytes": b"\xffok", "loop": loop, "fine": (1, Colour.RED), "other": object()})
    assert out["bytes"] == "\ufffdok" and out["fine"] == [1, "red"]
    assert out["other"].startswith("<object object at")
    depth, inner = 0, out["loop"]
    while isinstance(inner, list):
        depth, inner = depth + 1, inner[0]
    assert inner == "[[...]]" and depth == 63  # cut at the depth limit (the dict is the 64th level), as text
