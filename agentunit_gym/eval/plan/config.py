"""What defines a run: :class:`EvalConfig` (written to ``config.json``; a resume must match it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentunit_gym.eval.plan.routing import full_env_id, registered_env_ids
from agentunit_gym.wrappers.protocols import PROTOCOLS, ProtocolName

VectorMode = Literal["sync", "threads", "async"]
"""Where the evaluator's env copies live (``--vector``, :mod:`agentunit_gym.eval.run.copies`):
``threads``, the same as unset, in this process, each called on an env thread of its own;
``sync``, each in a one-env gymnasium ``SyncVectorEnv`` in this process; ``async``, each in a
one-env gymnasium ``AsyncVectorEnv``, a process of its own. Episodes run on the one
asynchronous engine in every case."""

Protocol = ProtocolName
"""Evaluation protocols (``--protocol``): ``agentunit`` (feedback and continue on an invalid
reply, each task's own turn limit, the env's observation caps and tools), ``agentbench``
(AgentBench's settings: an invalid reply ends the episode, the domain's AgentBench turn
limit for every task, AgentBench's observation caps, the ReAct prompt with the worked
example), ``agentbench-fc`` (the same, with AgentBench FC's tool schemas). What each sets is
decided in one place, :mod:`agentunit_gym.wrappers.protocols`."""


InvalidAction = Literal["continue", "terminate"]

class EvalConfig(BaseModel):
    """Everything that defines a run (written to ``config.json``; a resume must match it)."""

    model_config = ConfigDict(frozen=True)

    envs: tuple[str, ...] = Field(default=(), validate_default=True)
    """Env ids (a short id, without the ``AgentUnit/`` namespace, works); empty for every
    registered env."""
    agent: str = "oracle"
    """``oracle``, ``random``, ``openai:<model>`` or ``module:attr``."""
    backends: tuple[str, ...] = ("auto",)
    """Backends; each applies to the env kinds it belongs to (docker/local: OS, mysql/sqlite: DB)."""
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
    """Where the env copies live (:data:`VectorMode`); None (the default) and ``threads``: in
    this process. Every run uses the asynchronous episode engine
    (:mod:`agentunit_gym.eval.run.engine`): each episode steps as soon as its own agent replies."""
    env_options: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for every env (e.g. ``max_steps``)."""
    env_options_by_env: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Keyword arguments for one env each, by full env id (``--env-option``, e.g. the KG
    ``endpoint`` or the shop ``url``); they win over :attr:`env_options` and the protocol's."""
    tasks: tuple[str, ...] = ()
    """Task files or folders (``--tasks``; native or a domain loader's format, e.g. AgentBench's
    data), absolute paths. They replace the bundled suite of each domain they hold tasks of;
    the envs of other domains keep their bundled suites (the CLI sets ``envs`` to the domains
    the paths hold tasks of when no ``--env`` is given)."""
    protocol: Protocol = "agentunit"
    """The evaluation protocol (see :data:`Protocol`)."""
    agentbench_root: str | None = None
    """The AgentBench checkout (absolute path) whose instructions and one-shot examples open each
    episode under ``protocol="agentbench"`` (``--agentbench-root``, or the checkout a ``--tasks``
    path lies in); None: the chat agent's own system message and worked example, also under
    that protocol (docs/eval.md, "Prompts under --protocol agentbench")."""
    agent_settings: dict[str, Any] = Field(default_factory=dict)
    """How the agent was reached (``base_url``, ``api_key_env``, ``mode``, ``max_rps``), so a
    ``--resume`` without those options reaches it the same way. Never the key itself."""
    invalid_action: InvalidAction = "continue"
    """An invalid reply: ``continue`` shows feedback and goes on; ``terminate`` ends the
    episode as IF/IA (AgentBench's behaviour; the ``agentbench`` protocols' default)."""

    network: bool = False
    """Give the envs the network (``--network``): passed as ``network=True`` to the envs of the
    domains that take it (the OS sandboxes); other envs are unaffected. Off by default; tasks
    that need the network are left out of a run without it (listed in ``summary.json``)."""

    full_text: bool = False
    """Record every text of the traces in full (``--full-text``) instead of capped at 4000
    characters, so an export (``agentunit-gym export``) gives untruncated conversations."""

    @field_validator("envs")
    @classmethod
    def _full_ids(cls, envs: tuple[str, ...]) -> tuple[str, ...]:
        # One spelling per env, so a resume with ``OS-v0`` matches a run made with ``AgentUnit/OS-v0``.
        return tuple(full_env_id(e) for e in envs) if envs else tuple(registered_env_ids())

    def resume_key(self) -> dict[str, Any]:
        """The fields a resumed run must share with the original (not concurrency or retries)."""
        return self.model_dump(include={"envs", "agent", "backends", "n", "runs", "task_ids", "categories",
                                        "trap_rate", "seed", "env_options", "env_options_by_env", "tasks", "protocol",
                                        "agentbench_root", "invalid_action", "network", "full_text"})


__all__ = ["PROTOCOLS", "EvalConfig", "InvalidAction", "Protocol", "VectorMode"]
