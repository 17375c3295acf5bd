"""examples/train_grpo_report.py: the before/after metrics and their intervals (no torch needed)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_grpo_report.py"


@pytest.fixture(scope="module")
def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_grpo_report", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _episode(task: str, finish: str, success: bool = False, reward: float = 0.0) -> dict[str, Any]:
    return {"task_id": task, "finish_reason": finish, "success": success, "reward": reward, "turns": 1}


def test_a_side_counts_invalid_episodes_by_their_finish_reason(report: ModuleType) -> None:
    episodes = [_episode("a", "invalid_format", reward=-0.5), _episode("a", "invalid_action", reward=-0.5),
                _episode("b", "complete", success=True, reward=1.0), _episode("b", "task_limit")]
    side = report.side(episodes)
    assert side["episodes"] == 4 and side["tasks"] == 2
    assert side["valid_action_rate"]["value"] == 0.5  # 1 - IF - IA
    assert side["success_rate"]["value"] == 0.25
    assert side["mean_reward"]["value"] == 0.0
    assert side["finish_reasons"] == {"invalid_format": 1, "invalid_action": 1, "complete": 1, "task_limit": 1}
    for metric in ("success_rate", "valid_action_rate", "mean_reward"):
        assert side[metric]["low"] <= side[metric]["value"] <= side[metric]["high"]


def test_the_difference_is_paired_by_task_and_excludes_0_only_when_the_change_is_clear(report: ModuleType) -> None:
    tasks = [f"t{i}" for i in range(30)]
    before = [_episode(t, "invalid_format") for t in tasks for _ in range(3)]
    after = [_episode(t, "complete", success=i % 2 == 0) for i, t in enumerate(tasks) for _ in range(3)]
    diff = report.difference(before, after)
    assert diff["valid_action_rate"]["value"] == 1.0 and diff["valid_action_rate"]["excludes_0"]
    assert diff["success_rate"]["value"] == 0.5 and diff["success_rate"]["excludes_0"]
    same = report.difference(after, after)
    assert same["success_rate"]["value"] == 0.0 and not same["success_rate"]["excludes_0"]
    with pytest.raises(ValueError, match="different tasks"):
        report.difference(before, after[:3])


def test_phases_run_apart_merge_into_one_summary(report: ModuleType, tmp_path: Path) -> None:
    config = {"group_size": 2, "groups_per_step": 1, "eval_max_turns": 2, "max_new_tokens": 8,
              "eval_temperature": 0.7, "reply_opening": "Think:", "format_penalty": 0.5,
              "eval_repeats_bundled": 1, "eval_generated": 2,
              "eval_batch": 2, "seed": 0}
    base = {"config": config, "train_families": ["gen-db/count-above"], "before": {}, "after": {}}
    episodes = [_episode("a", "invalid_format"), _episode("b", "complete", success=True, reward=1.0)]
    history = [{"step": 1, "reward": -0.5, "valid_action_rate": 0.0, "success_rate": 0.0, "elapsed_s": 60.0}]
    parts = [{**base, "before": {"s": episodes}, "before_s_s": 10.0},
             {**base, "history": history, "train_s": 60.0},
             {**base, "after": {"s": episodes}, "after_s_s": 12.0}]
    summary = report.summarise(report.merge(parts), commit="abc")
    assert summary["steps"] == 1 and summary["train_episodes"] == 2 and summary["commit"] == "abc"
    assert summary["wall_time_s"] == {"before_s_s": 10.0, "train_s": 60.0, "after_s_s": 12.0}
    assert summary["sets"]["s"]["difference"]["success_rate"]["value"] == 0.0
    json.dumps(summary)  # the results file is plain JSON
    rows = report.table(summary).splitlines()
    assert rows[2].startswith("| s (2 episodes a side, 2 tasks) | success rate | 0.500 [")
    assert rows[3].endswith("| +0.000 [+0.000, +0.000] |")  # valid-action rate, the same on both sides
    with pytest.raises(ValueError, match="max_new_tokens"):
        report.merge([parts[0], {**parts[1], "config": {**config, "max_new_tokens": 16}}])
