"""Sticky groups through the env server: ``AgentUnit/Remote-v0`` copies in a vector env keep the
group's task across autoresets, since a bare reset reaches the served env as bare (issue 33)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("openenv")

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.serve.server import RunningServer, ServeConfig, start_server  # noqa: E402

TASK = "db-antibiotics-06"
COMMIT = 'Action: Answer\nFinal Answer: ["1"]'
SELECT = "Action: Operation\n```sql\nSELECT 1;\n```"


@pytest.fixture(scope="module")
def served() -> Iterator[RunningServer]:
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=2)) as running:
        yield running


def test_a_sticky_group_of_remote_copies_keeps_its_task(served: RunningServer) -> None:
    envs = gym.vector.SyncVectorEnv([partial(gym.make, "AgentUnit/Remote-v0", url=served.url)] * 2)
    try:
        _, infos = envs.reset(seed=0, options={"task_id": TASK, "sticky": True})
        seen, ends = [list(infos["task_id"])], np.zeros(2, dtype=int)
        turn = 0
        while ends.min() < 3:
            replies = (COMMIT, (SELECT, COMMIT)[turn % 2])
            *_, terminated, truncated, infos = envs.step(replies)
            ends += terminated | truncated
            seen.append(list(infos["task_id"]))
            turn += 1
        assert {t for row in seen for t in row} == {TASK}
        # Released by an explicit reset: the served copies draw again.
        _, infos = envs.reset(seed=3)
        assert TASK not in set(infos["task_id"])
    finally:
        envs.close()
