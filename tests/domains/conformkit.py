"""The registered domains as test cases, for the conformance suite and the vector and pickling tests.

Every domain the registry finds is a case, and so is the out-of-tree example
(examples/echo-domain), which :func:`example_domain_installed` installs the way a user
installs a domain: ``pip install`` into a folder of its own, that folder on ``sys.path``,
the registry rescanned. A domain that registers later becomes a case without an edit here.

Each case runs on its domain's embedded backend (``Domain.embedded_backend``), the one that
needs no daemon; the replies the tests send are derived from the domain's own description
and bundled tasks (its reference solutions, its tools), never written per domain.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentunit_gym.core import registry
from agentunit_gym.core.domain import Domain
from agentunit_gym.core.env import AgentEnv
from agentunit_gym.core.reference import OutputReply
from agentunit_gym.tasks.spec import ReferenceStep, TaskSpec
from agentunit_gym.wrappers.registration import register_envs

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "echo-domain"
"""The out-of-tree example domain's package source."""
EXAMPLE_DOMAIN = "echo"
EXAMPLE_MODULE = "echo_domain"

PROSE = "I am not sure what to do yet; let me think about it."
"""A reply with no call in any grammar: INVALID_FORMAT (no_call) everywhere."""
UNKNOWN_TOOL = '{"name": "search_web", "arguments": {"query": "largest file"}}'
"""A JSON tool call of a tool no domain has: INVALID_ACTION (unknown_tool) everywhere."""
HUGE = 100_000
"""Characters in a huge reply."""


def case_names() -> list[str]:
    """Every registered domain, and the example domain (installed by the tests) last."""
    names = registry.domain_names()
    return [*names, EXAMPLE_DOMAIN] if EXAMPLE_DOMAIN not in names else names


def install_example(target: Path) -> Path:
    """``pip install`` the example domain into ``target/site`` (never the shared environment)."""
    source = target / "echo-domain"
    shutil.copytree(EXAMPLE, source)  # pip builds in the source folder: keep the tree clean
    site = target / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--disable-pip-version-check", "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install of the example domain failed: {done.stderr[-2000:]}")
    return site


@contextmanager
def example_domain_installed(site: Path) -> Iterator[Domain]:
    """The example domain registered in this process for the duration: its installed folder
    on ``sys.path`` (so its entry point is found), the registry rescanned and the gymnasium
    ids registered; afterwards all of it undone (path, modules, registry, gymnasium ids)."""
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    registry.reload()
    try:
        register_envs()
        domain = registry.get_domain(EXAMPLE_DOMAIN)
        yield domain
    finally:
        sys.path.remove(str(site))
        for name in [m for m in sys.modules if m == EXAMPLE_MODULE or m.startswith(EXAMPLE_MODULE + ".")]:
            del sys.modules[name]
        importlib.invalidate_caches()
        registry.reload()
        namespaces = {"EchoCorp/"}
        for env_id in [e for e in gym.registry if any(e.startswith(n) for n in namespaces)]:
            del gym.registry[env_id]


@dataclass(frozen=True)
class DomainCase:
    """One domain under test, on its embedded backend."""

    domain: Domain

    @property
    def env_id(self) -> str:
        return self.domain.env_ids[0]

    @property
    def kwargs(self) -> dict[str, Any]:
        """What ``gym.make`` gets besides the id: the embedded backend."""
        return {"backend": self.domain.embedded_backend.name}

    def make(self, **options: Any) -> gym.Env[str, str]:
        return gym.make(self.env_id, **self.kwargs, **options)


def _plain_steps(env: AgentEnv[Any], task: TaskSpec) -> list[ReferenceStep]:
    return [s for s in task.reference_solution if not s.from_output and not env.tool_table[s.tool].commits]


def probe_task(env: AgentEnv[Any]) -> TaskSpec:
    """The runnable task with the shortest reference solution that has a non-committing step
    (one that looks without ending the episode), for the finish-reason matrix."""
    candidates = [t for t in env.tasks if _plain_steps(env, t)]
    assert candidates, f"no task of {env.domain} has a non-committing reference step"
    return min(candidates, key=lambda t: (len(t.reference_solution), t.id))


def look_reply(env: AgentEnv[Any], task: TaskSpec) -> str:
    """The task's first non-committing reference step, as the agent writes it."""
    reply = env.render_action(_plain_steps(env, task)[0])
    assert isinstance(reply, str)
    return reply


def oracle_sample(env: AgentEnv[Any], count: int = 4) -> list[TaskSpec]:
    """``count`` runnable tasks spread over the suite (sorted by id), for the oracle check."""
    tasks = sorted(env.tasks, key=lambda t: t.id)
    if len(tasks) <= count:
        return tasks
    stride = len(tasks) / count
    return [tasks[int(i * stride)] for i in range(count)]


def run_reference(env: gym.Env[str, str], task: TaskSpec,
                  options: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], tuple[Any, ...]]:
    """Reset ``env`` (a stack or a bare env) to ``task`` and play its reference solution;
    returns every step's info and the last 5-tuple."""
    base: AgentEnv[Any] = env.unwrapped  # type: ignore[assignment]
    observation, _ = env.reset(seed=0, options={"task_id": task.id, **(options or {})})
    infos: list[dict[str, Any]] = []
    last: tuple[Any, ...] = ()
    for step in task.reference_solution:
        reply = base.render_action(step)
        if isinstance(reply, OutputReply):
            reply = reply.complete(observation)
        last = env.step(reply)
        observation = last[0]
        infos.append(last[4])
        if last[2] or last[3]:
            break
    return infos, last


def valid_replies(env: AgentEnv[Any], count: int = 4) -> tuple[str, ...]:
    """Replies that parse to actions: reference steps of the first tasks, the looking ones
    (which leave the episode running) first, then committing ones."""
    looks: list[str] = []
    commits: list[str] = []
    for task in sorted(env.tasks, key=lambda t: t.id):
        for step in task.reference_solution:
            reply = env.render_action(step) if not step.from_output else None
            if isinstance(reply, str) and reply not in looks + commits:
                (commits if env.tool_table[step.tool].commits else looks).append(reply)
        if len(looks) >= count // 2 and len(commits) >= count - count // 2:
            break
    return tuple(looks[: count // 2] + commits[: count - count // 2])


def huge_reply(env: AgentEnv[Any]) -> str:
    """A huge reply that still parses: a looking step's argument padded with spaces."""
    task = probe_task(env)
    step = _plain_steps(env, task)[0]
    spec = env.tool_table[step.tool]
    if isinstance(step.arguments, str) and spec.primary is not None:
        padded = ReferenceStep(tool=step.tool, arguments={spec.primary: step.arguments + " " * HUGE})
        reply = env.render_action(padded)
        if isinstance(reply, str):
            return reply
    return look_reply(env, task) + " " * HUGE


def invalid_replies() -> tuple[str, ...]:
    return (PROSE, UNKNOWN_TOOL)
