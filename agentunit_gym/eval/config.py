"""What defines a run: :class:`EvalConfig` (written to ``config.json``; a resume must match it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentunit_gym.core import registry
from agentunit_gym.eval.routing import full_env_id

VectorMode = Literal["sync", "threads", "async"]

DEFAULT_VECTOR_MODE: VectorMode = "threads"
"""The lockstep vector env that ``--vector`` names when a lockstep loop is asked for.
Measured in docs/performance.md ("Evaluator"): copies stepped in a thread pool beat both
gymnasium's SyncVectorEnv (copies one after another) and AsyncVectorEnv (a process per
copy: pickling, pipes, and a backend start per process) on these I/O-bound envs."""


class EvalConfig(BaseModel):
    """Everything that defines a run (written to ``config.json``; a resume must match it)."""

    model_config = ConfigDict(frozen=True)

    envs: tuple[str, ...] = Field(default_factory=lambda: tuple(registry.env_ids()))
    """Env ids, full or short (``OS-v0`` for ``AgentUnit/OS-v0``); default: every registered env."""
    agent: str = "oracle"
    """``oracle``, ``random``, ``openai:<model>`` or ``module:attr``."""
    backends: tuple[str, ...] = ("auto",)
    """Backends; each applies to the envs of the domain that declares it (see ``routing.backend_for``)."""
    n: int | None = Field(default=None, ge=1)
    """Tasks sampled per env (seeded); None for all."""
    runs: int = Field(default=1, ge=1)
    """Repeats per task."""
    concurrency: int = Field(default=4, ge=1)
    """Episodes in flight per env."""
    task_ids: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    trap_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    seed: int = 0
    episode_timeout_s: float = Field(default=600.0, gt=0)
    """Wall-clock limit of one episode, agent time included."""
    max_infra_retries: int = Field(default=2, ge=0)
    vector: VectorMode | None = None
    """None (the default): asynchronous episodes, each stepping as soon as its own agent
    replies (:mod:`agentunit_gym.eval.episodes`). ``sync``, ``threads`` or ``async``: the
    lockstep loop over that gymnasium vector env (:mod:`agentunit_gym.eval.lockstep`), one
    step for every copy per turn, as an RL-style loop runs."""
    env_options: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for every env (e.g. ``max_steps``)."""

    @field_validator("envs")
    @classmethod
    def _full_ids(cls, envs: tuple[str, ...]) -> tuple[str, ...]:
        # One spelling per env, so a resume with a short id matches a run made with the full one.
        return tuple(full_env_id(e) for e in envs)

    def resume_key(self) -> dict[str, Any]:
        """The fields a resumed run must share with the original (not concurrency or retries)."""
        return self.model_dump(include={"envs", "agent", "backends", "n", "runs", "task_ids", "categories",
                                        "trap_rate", "seed", "env_options"})


__all__ = ["DEFAULT_VECTOR_MODE", "EvalConfig", "VectorMode"]
