"""The OS and DB envs under the stack on every backend (docker and mysql included), and
scripted agents for them. Every registered domain's embedded backend runs the same finish
reasons, replies and traps in the domain conformance suite (tests/domains/test_conformance.py);
these targets add the container backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.core.registry import domain_of_env
from agentunit_gym.tasks.spec import ReferenceStep
from agentunit_gym.wrappers import make_eval_env
from agentunit_gym.wrappers.info import agent_env


@dataclass(frozen=True)
class Target:
    env_id: str
    backend: str
    task: str
    """A question task solved by its reference solution in 2 steps."""
    flood: str
    """A reply whose observation is long (to overflow a small context)."""
    context: int
    """A context size the task's prompt and reference solution fit in, and the flood does not."""

    @property
    def domain(self) -> str:
        found = domain_of_env(self.env_id)
        assert found is not None, self.env_id
        return found.name


OS_FLOOD = "Act: bash\n```bash\nseq 100000 100400 | tr '\\n' ','\n```"
DB_FLOOD = "Action: Operation\n```sql\nSELECT * FROM seattle_weather\n```"

TARGETS = {
    "os-local": Target("AgentUnit/OS-v0", "local", "os-files-largest", OS_FLOOD, 900),
    "os-docker": Target("AgentUnit/OS-v0", "docker", "os-files-largest", OS_FLOOD, 900),
    "db-sqlite": Target("AgentUnit/DB-v0", "sqlite", "db-weather-03", DB_FLOOD, 900),
    "db-mysql": Target("AgentUnit/DB-v0", "mysql", "db-weather-03", DB_FLOOD, 900),
}

BACKEND_PARAMS = [
    pytest.param("os-local", id="os-local"),
    pytest.param("os-docker", id="os-docker", marks=pytest.mark.docker),
    pytest.param("db-sqlite", id="db-sqlite"),
    pytest.param("db-mysql", id="db-mysql", marks=[pytest.mark.docker, pytest.mark.mysql]),
]
FAST_PARAMS = [p for p in BACKEND_PARAMS if not p.marks]


def stacked(target: Target, **options: Any) -> gym.Env[str, str]:
    """The standard stack over the target's env, with the test defaults."""
    options.setdefault("max_steps", 4)
    options.setdefault("max_context_tokens", target.context)
    return make_eval_env(target.env_id, backend=target.backend, **options)


def env_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., gym.Env[str, str]]]:
    """Make stacked envs for a target and close them all at the end of the scope."""
    made: list[gym.Env[str, str]] = []
    target = TARGETS[request.param]

    def make(**options: Any) -> gym.Env[str, str]:
        env = stacked(target, **options)
        made.append(env)
        return env

    make.target = target  # type: ignore[attr-defined]
    yield make
    for env in made:
        env.close()


def reference_replies(env: gym.Env[str, str]) -> list[str]:
    """The current task's reference solution, as ReAct replies."""
    base = agent_env(env)
    assert base.task is not None
    return [base.render_action(step) for step in base.task.reference_solution]


def render(env: gym.Env[str, str], tool: str, arguments: dict[str, Any]) -> str:
    return agent_env(env).render_action(ReferenceStep(tool=tool, arguments=arguments))


def run(env: gym.Env[str, str], replies: list[str]) -> tuple[list[dict[str, Any]], tuple[Any, ...]]:
    """Send ``replies`` until the episode ends; returns every step's info and the last 5-tuple."""
    infos: list[dict[str, Any]] = []
    last: tuple[Any, ...] = ()
    for reply in replies:
        last = env.step(reply)
        infos.append(last[4])
        if last[2] or last[3]:
            break
    return infos, last
