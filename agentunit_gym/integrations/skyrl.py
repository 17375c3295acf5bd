"""AgentUnit envs as SkyRL-Gym text envs (``skyrl_gym.envs.base_text_env.BaseTextEnv``).

SkyRL's generator makes one env per trajectory with ``skyrl_gym.make(env_class,
env_config=..., extras=...)``, calls ``init(prompt)`` for the opening conversation, then
``step(model_output)`` until ``done``; each step returns the new chat messages, the reward,
``done`` and ``metadata``. :class:`AgentUnitTextEnv` does that over one AgentUnit env under
the :class:`~agentunit_gym.wrappers.ChatMessages` wrapper (``mode="delta"``), so the messages
are the ones the evaluator sends a model (:class:`~agentunit_gym.core.chat.ChatTranscript`).

Importing this module registers every AgentUnit env id with ``skyrl_gym`` under two names
(:func:`skyrl_names`): the gymnasium id itself (``AgentUnit/DB-v0``: the ``env_class`` column
of ``agentunit-gym export`` rows) and a lower-case alias that is also a valid key in
SkyRL's Hydra config (``agentunit-db-v0``)::

    import skyrl_gym
    import agentunit_gym.integrations.skyrl  # registers the envs

    env = skyrl_gym.make("agentunit-db-v0", env_config={"backend": "sqlite"},
                         extras={"extra_info": {"task_id": "db-airports-01"}, "max_turns": 15})
    messages, metadata = env.init([])
    out = env.step("Action: Operation\\n```sql\\nSELECT 1\\n```")
    out["observations"], out["reward"], out["done"], out["metadata"]

Raises on import:
    MissingDependencyError: ``skyrl-gym`` is not installed (``pip install "agentunit-gym[integrations]"``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from agentunit_gym.core.chat import CHAT_STYLES, ChatStyle
from agentunit_gym.core.registry import env_ids, full_env_id
from agentunit_gym.errors import INFRA_ERRORS, ConfigError, EpisodeStateError, MissingDependencyError
from agentunit_gym.integrations import INTEGRATIONS_EXTRA
from agentunit_gym.wrappers.chat import ChatMessages
from agentunit_gym.wrappers.info import agent_env
from agentunit_gym.wrappers.limits import LimitEpisode
from agentunit_gym.wrappers.registration import register_envs
from agentunit_gym.wrappers.stack import make_protocol_env

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise MissingDependencyError(str(exc.name or "skyrl_gym"), INTEGRATIONS_EXTRA,
                                 "agentunit_gym.integrations.skyrl (AgentUnit envs in SkyRL)") from exc

ENTRY_POINT = "agentunit_gym.integrations.skyrl:AgentUnitTextEnv"
"""What the ``skyrl_gym`` registry imports to make an env."""

CONFIG_KEYS = ("backend", "style", "examples", "env_kwargs", "protocol", "agentbench_root")
"""The keys of ``env_config`` this adapter reads (SkyRL's ``env_class`` key is ignored)."""

DEFAULT_STYLE: ChatStyle = "react"
"""SkyRL appends the model's raw text as a plain assistant message (no ``tool_calls``), so the
env's replies are user messages, not ``tool`` messages: the ``react`` conversation."""


def skyrl_names(env_id: str) -> tuple[str, str]:
    """The two ``skyrl_gym`` names of an AgentUnit env id: the id, and its lower-case alias.

    Example:
        >>> skyrl_names("AgentUnit/DB-v0"), skyrl_names("KG-v0")
        (('AgentUnit/DB-v0', 'agentunit-db-v0'), ('AgentUnit/KG-v0', 'agentunit-kg-v0'))
    """
    full = full_env_id(env_id)
    return full, full.lower().replace("/", "-")


def register_skyrl_envs() -> list[str]:
    """Register every AgentUnit env id with ``skyrl_gym`` (idempotent; done on import).

    Returns:
        The registered names, both forms of each id (:func:`skyrl_names`).
    """
    register_envs()
    names: list[str] = []
    for env_id in env_ids():
        for name in skyrl_names(env_id):
            if name not in skyrl_gym.registry:
                skyrl_gym.register(id=name, entry_point=ENTRY_POINT, kwargs={"env_id": env_id})
            names.append(name)
    return names


class AgentUnitTextEnv(BaseTextEnv):  # type: ignore[misc]  # skyrl_gym ships no type hints
    """One AgentUnit env as a SkyRL-Gym ``BaseTextEnv``: one trajectory per instance.

    ``init(prompt)`` resets the env on the task the ``extras`` name and returns the opening
    conversation (system, the domain's worked example, the task), which replaces the
    dataset's ``prompt`` (for rows of ``agentunit-gym export`` they are the same messages).
    ``step(reply)`` sends the model's raw reply to the env and returns:

    - ``observations``: the env's answer as one new message (a ``user`` message in ``react``
      style); ``[]`` once the episode is over, as SkyRL's own envs do;
    - ``reward``: the env's reward (the terminal domain score, 0 before the end);
    - ``done``: the episode ended (terminated or truncated);
    - ``metadata``: ``task_id``, ``step``, ``finish_reason`` (None while running),
      ``action_error`` (the issue of an invalid reply, else None), and at the end ``score``
      (``reward``, ``success``, every ``components`` entry of the domain metric, ``detail``).

    An invalid reply is an observation (the env's feedback), not an error. A failure of the
    infrastructure (the backend, an env server, the network: :data:`~agentunit_gym.errors.INFRA_ERRORS`)
    is never a reward: ``init`` or ``step`` raises it, typed, after closing the env (SkyRL's
    generator does not close an env whose ``step`` raised), so the batch fails visibly instead of
    training on a 0. The model is SkyRL's own inference engine, which the env never calls.

    Args:
        env_id: the AgentUnit env id (set by the registration).
        env_config: SkyRL's per-env-class config (a mapping or an omegaconf ``DictConfig``):
            ``backend`` (the env's backend, default the embedded one), ``style`` (``react``,
            default, or ``tools``), ``examples`` (put the worked example in the prompt,
            default True), ``env_kwargs`` (other keyword arguments of ``gym.make``), ``protocol``
            (``agentbench``, ``agentbench-fc``: the evaluator's stack under that protocol,
            :func:`~agentunit_gym.wrappers.stack.make_eval_env`; default none, the bare env) and
            ``agentbench_root`` (a checkout whose prompts open episodes under ``agentbench``).
        extras: the dataset row's fields SkyRL passes: the task from ``task_id``,
            ``extra_info.task_id`` or ``reward_spec.ground_truth`` (the export's columns), else
            the seeded RNG picks; the seed from ``extra_info.seed`` or ``seed``; ``max_turns``
            (SkyRL's ``generator.max_turns``) ends the episode as TASK_LIMIT after that many
            steps, under the env's own turn limit.

    Raises:
        ConfigError: an unknown env id or ``env_config`` key, a bad ``style`` or ``max_turns``.
    """

    def __init__(self, env_id: str, env_config: Mapping[str, Any] | None = None,
                 extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        config = _plain(env_config or {})
        unknown = sorted(set(config) - set(CONFIG_KEYS) - {"env_class"})
        if unknown:
            raise ConfigError(f"unknown env_config key(s) {unknown} for {env_id}; the keys are "
                              f"{', '.join(CONFIG_KEYS)} (other gym.make arguments go under env_kwargs).")
        full = full_env_id(env_id)
        if full not in env_ids():
            raise ConfigError(f"unknown AgentUnit env id {env_id!r}; the ids are {', '.join(env_ids())}.")
        style = config.get("style", DEFAULT_STYLE)
        if style not in CHAT_STYLES:
            raise ConfigError(f"env_config style must be one of {', '.join(CHAT_STYLES)}, got {style!r}.")
        self.env_id = full
        self.extras = _plain(extras or {})
        make_kwargs = dict(config.get("env_kwargs") or {})
        if config.get("backend") is not None:
            make_kwargs["backend"] = config["backend"]
        register_envs()
        inner = make_protocol_env(full, config.get("protocol"), agentbench_root=config.get("agentbench_root"),
                                  **make_kwargs)
        max_turns = self.extras.get("max_turns")
        if max_turns is not None:
            if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
                inner.close()
                raise ConfigError(f"extras max_turns must be an integer of at least 1 (SkyRL's "
                                  f"generator.max_turns), got {max_turns!r}.")
            inner = LimitEpisode(inner, max_steps=max_turns)
        self.env = ChatMessages(inner, mode="delta", style=style, examples=bool(config.get("examples", True)))
        self.max_turns = int(max_turns) if max_turns is not None else agent_env(inner).default_max_steps
        self.played_task_id: str | None = None
        """The task of the episode, once ``init`` picked it."""
        self.turns = 0
        self.done = False
        self._started = False
        self._closed = False
        self._last_info: dict[str, Any] = {}

    # ------------------------------------------------------------- SkyRL API

    def init(self, prompt: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start the episode; return the opening messages and ``{"task_id", "env_id", "max_steps"}``.

        Args:
            prompt: the dataset's prompt; not used (the env builds the conversation).

        Raises:
            EpisodeStateError: the env is closed, or ``init`` was already called.
            TaskNotFoundError: the task the extras name is not in the env's suite.
            BackendError, BackendTimeoutError, BackendUnavailableError: the backend failed; the
                env is closed.
        """
        if self._closed:
            raise EpisodeStateError("init() after close(): make a new env with skyrl_gym.make().")
        if self._started:
            raise EpisodeStateError("init() called twice: SkyRL plays one trajectory per env; make a new env.")
        options = {"task_id": self.task_id} if self.task_id is not None else None
        try:
            messages, info = self.env.reset(seed=self.seed, options=options)
        except INFRA_ERRORS:
            self.close()
            raise
        self._started = True
        self._last_info = info
        self.played_task_id = str(info["task_id"])
        # The env's own turn limit, under SkyRL's max_turns when LimitEpisode is on (its "step_limit").
        self.max_turns = min(int(info["max_steps"]), int(info.get("step_limit") or info["max_steps"]))
        return messages, {"task_id": self.played_task_id, "env_id": self.env_id, "max_steps": self.max_turns}

    def step(self, action: str) -> dict[str, Any]:
        """Send the model's reply to the env (see the class docstring for what comes back).

        Raises:
            EpisodeStateError: before ``init``, after the episode ended, or after ``close``.
            BackendError, BackendTimeoutError, BackendUnavailableError: the backend failed; the
                episode is over without a reward and the env is closed.
        """
        if self._closed:
            raise EpisodeStateError("step() after close(): make a new env with skyrl_gym.make().")
        if not self._started:
            raise EpisodeStateError("step() before init(): call init(prompt) first.")
        if self.done:
            raise EpisodeStateError(
                f"step() after the episode ended ({self._last_info.get('finish_reason')}): SkyRL plays one "
                "trajectory per env; make a new env with skyrl_gym.make() for the next one.")
        try:
            messages, reward, terminated, truncated, info = self.env.step(action)
        except INFRA_ERRORS:
            self.close()  # the episode is over (finish reason error) and nothing else will free the backend
            raise
        self.turns += 1
        self.done = bool(terminated or truncated)
        self._last_info = info
        metadata = {"task_id": self.played_task_id, **_metadata(info)}
        return {"observations": [] if self.done else messages, "reward": float(reward), "done": self.done,
                "metadata": metadata, "postprocessed_action": None}

    def get_metrics(self) -> dict[str, Any]:
        """Numbers for SkyRL's per-env metrics: ``reward``, ``success``, ``steps`` and each
        numeric score component (``score/<name>``), once the episode is over; else ``{}``."""
        score = self._last_info.get("score")
        if not self.done or not isinstance(score, Mapping):
            return {}
        metrics: dict[str, Any] = {"reward": float(score.get("reward", 0.0)),
                                   "success": float(bool(score.get("success"))), "steps": self.turns}
        for name, value in dict(score.get("components") or {}).items():
            if isinstance(value, (bool, int, float)):
                metrics[f"score/{name}"] = float(value)
        return metrics

    def close(self) -> None:
        """Release the env's backend (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.env.close()

    # ------------------------------------------------------------ the extras

    @property
    def task_id(self) -> str | None:
        """The task the dataset row names, None to let the seeded RNG pick."""
        extra_info = self.extras.get("extra_info") or {}
        reward_spec = self.extras.get("reward_spec") or {}
        for found in (self.extras.get("task_id"), extra_info.get("task_id"), reward_spec.get("ground_truth")):
            if found is not None and str(found):
                return str(found)
        return None

    @property
    def seed(self) -> int | None:
        """The reset seed the dataset row gives, if any."""
        extra_info = self.extras.get("extra_info") or {}
        found = extra_info.get("seed", self.extras.get("seed"))
        return int(found) if found is not None and str(found) != "" else None


def _metadata(info: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-friendly part of a step's ``info`` that SkyRL keeps."""
    # The env's "none" is an empty value (every info key keeps one type for vector envs); SkyRL
    # gets None for it.
    reason = info.get("finish_reason")
    error = info.get("action_error")
    metadata: dict[str, Any] = {
        "step": info.get("step"),
        "finish_reason": getattr(reason, "value", reason) or None,
        "action_error": (error.get("issue") or None) if isinstance(error, Mapping) and error else None,
    }
    if info.get("score"):
        metadata["score"] = copy.deepcopy(info["score"])
    return metadata


def _plain(config: Mapping[str, Any]) -> dict[str, Any]:
    """A plain ``dict`` of a mapping or an omegaconf container (SkyRL passes ``DictConfig``)."""
    try:
        from omegaconf import DictConfig, OmegaConf
    except ImportError:  # pragma: no cover - skyrl-gym depends on omegaconf
        return dict(config)
    if isinstance(config, DictConfig):
        container = OmegaConf.to_container(config, resolve=True)
        return {str(key): value for key, value in container.items()} if isinstance(container, dict) else {}
    return {key: OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value
            for key, value in config.items()}


register_skyrl_envs()

__all__ = ["CONFIG_KEYS", "DEFAULT_STYLE", "ENTRY_POINT", "AgentUnitTextEnv", "register_skyrl_envs", "skyrl_names"]
