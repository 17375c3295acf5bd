"""A trainer's batch of AgentBench DB items on one MariaDB server, half the replies garbage.

gymnasium's SyncVectorEnv of three DB-v0 copies sharing one :class:`MySQLBackend`, each
bound to one of AgentBench's items around ``standard-00225`` (each names its own database,
so every episode's account is renewed off that name, and every autoreset opens the same
name again right after the renewal dropped it). Each copy cycles through episodes that
solve the task between garbage replies and episodes of garbage only, out of phase with the
others. Solved episodes score as the item says (1, 0 for ``standard-00225``, 1), garbage
never ends or breaks an episode, and the server is left as it was found.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.backends.sql.mysql import MySQLBackend, connect
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.domains.db.agentbench import load_agentbench_db

pytestmark = pytest.mark.docker

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "agentbench_dbbench" / "standard.jsonl"
GARBAGE = ("", "lol", "x" * 5000, "Action: Operation\n```sql\nSELEC broken\n```", "Action: Operation\n```sql\n")
SOLVED_REWARD = (1.0, 0.0, 1.0)
"""What solving each copy's item earns (``standard-00225``'s hash cannot be met)."""


def server_state(backend: MySQLBackend) -> tuple[set[str], set[str]]:
    """The server's databases and users, the backend's ready spares left out (they take turns)."""
    backend.settle()
    spare_databases, spare_users = backend.spare_names()
    conn = connect(backend.admin_connect_params())
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            databases = {row[0] for row in cur.fetchall()} - set(spare_databases)
            cur.execute("SELECT user FROM mysql.user")
            return databases, {row[0] for row in cur.fetchall()} - set(spare_users)
    finally:
        conn.close()


def test_named_database_copies_batched_with_garbage_replies() -> None:
    tasks = load_agentbench_db(FIXTURE)
    backend = MySQLBackend()
    try:
        before = server_state(backend)
        envs = gym.vector.SyncVectorEnv([partial(gym.make, "AgentUnit/DB-v0", sql_backend=backend, tasks=[task],
                                                 max_episode_steps=4) for task in tasks])
        solution = [[envs.envs[i].unwrapped.render_action(step) for step in task.reference_solution]
                    for i, task in enumerate(tasks)]
        plans = [lambda i: [GARBAGE[i], *solution[i]], lambda i: [GARBAGE[i + 1]] * 4,
                 lambda i: [solution[i][0], GARBAGE[i + 2], solution[i][1]]]
        plan_of = [i % len(plans) for i in range(3)]
        position = [0, 0, 0]
        resetting = [False, False, False]
        ends: list[list[tuple[int, float, bool, FinishReason]]] = [[], [], []]
        envs.reset(seed=0)
        for _ in range(30):
            replies = [GARBAGE[1] if resetting[i] else plans[plan_of[i]](i)[position[i]] for i in range(3)]
            _, rewards, terminated, truncated, info = envs.step(replies)
            for i in range(3):
                if resetting[i]:  # gymnasium's next-step autoreset: this step was the reset
                    resetting[i] = False
                    continue
                position[i] += 1
                if terminated[i] or truncated[i]:
                    reason = FinishReason(info["finish_reason"][i])
                    ends[i].append((plan_of[i], float(rewards[i]), bool(terminated[i]), reason))
                    plan_of[i], position[i], resetting[i] = (plan_of[i] + 1) % len(plans), 0, True
        envs.close()
        for i, episodes in enumerate(ends):
            solved = [e for e in episodes if e[0] != 1]
            garbage_only = [e for e in episodes if e[0] == 1]
            assert len(solved) >= 2 and garbage_only, (i, episodes)
            # A solve ends at the answer, on its last step, scored as the item says.
            assert all(done and reason is FinishReason.COMPLETE and reward == SOLVED_REWARD[i]
                       for _, reward, done, reason in solved), (i, episodes)
            # Garbage alone never ends an episode early: the step limit does, with nothing earned.
            assert all(not done and reward == 0.0 for _, reward, done, _ in garbage_only), (i, episodes)
        assert server_state(backend) == before  # no episode's database or user left behind
    finally:
        backend.close()
