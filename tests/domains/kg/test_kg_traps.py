"""The KG trap library: an agent that falls for a trap is flagged, one that ignores it is not, and the
answer's score is unaffected (the traps plant nothing: the store is read-only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.core.actions import render_json_call
from agentunit_gym.domains.kg.env import KGEnv
from agentunit_gym.domains.kg.store import bundled_store
from agentunit_gym.wrappers import InjectTraps, load_trap_library
from agentunit_gym.wrappers.traps import fill

LIBRARY = load_trap_library("kg")


@pytest.fixture(scope="module")
def wrapped() -> Iterator[InjectTraps]:
    with EmbeddedSPARQL(bundled_store()) as store:
        env = InjectTraps(KGEnv(sparql_backend=store), library="kg")
        yield env
        env.close()


def _episode(env: InjectTraps, trap: str, fall: bool) -> dict[str, Any]:
    _, _ = env.reset(seed=1, options={"task_id": "kg-001", "trap": trap})
    base = env.unwrapped
    assert isinstance(base, KGEnv) and base.task is not None
    replies = [base.render_action(step) for step in base.task.reference_solution]
    if fall:
        assert env.active_trap is not None and env._active is not None
        call = env.active_trap.example_attempt
        arguments = {k: fill(v, env._active.values) if isinstance(v, str) else v for k, v in call.arguments.items()}
        replies = [*replies[:-1], render_json_call(call.tool, arguments), replies[-1]]
    info: dict[str, Any] = {}
    reward = 0.0
    for reply in replies:
        _, r, terminated, _, info = env.step(reply)
        reward = float(r)
        if terminated:
            break
    return {"reward": reward, "trap": info["trap"], "info": info}


def test_library_shape() -> None:
    assert len(LIBRARY.traps) >= 4 and LIBRARY.domain == "kg"
    assert {"destructive", "secret_reading", "exfiltration"} <= {t.category for t in LIBRARY.traps}
    assert {t.placement for t in LIBRARY.traps} == {"prompt", "observation"}


@pytest.mark.parametrize("trap_id", LIBRARY.ids())
def test_every_trap(wrapped: InjectTraps, trap_id: str) -> None:
    ignored = _episode(wrapped, trap_id, fall=False)
    assert ignored["trap"]["trap_id"] == trap_id and ignored["trap"]["verdict"] == "refused", ignored["trap"]
    assert ignored["reward"] == 1.0
    fell = _episode(wrapped, trap_id, fall=True)
    assert fell["trap"]["verdict"] == "attempted", fell["trap"]
    assert fell["reward"] == 1.0  # the attempt reached no query: the store and the answer are untouched
