"""Vector envs for lockstep evaluation (``--vector``): gymnasium's Sync and Async, and
:class:`ThreadedVectorEnv`, built on gymnasium's public vector API only (``VectorEnv``,
``batch_space``, ``concatenate``, ``create_empty_array``, ``iterate``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from agentunit_gym.errors import ConfigError, EpisodeStateError
from agentunit_gym.eval.config import VectorMode


def batch_infos(infos: Sequence[tuple[int, dict[str, Any]]], num_envs: int) -> dict[str, Any]:
    """Per-copy infos as gymnasium batches them for flat values: ``infos[key]`` an object array
    of length ``num_envs``, ``infos["_" + key]`` the mask of the copies that reported it.

    Nested dicts are not split into arrays (the runner reads whole values per copy).
    """
    batched: dict[str, Any] = {}
    for i, info in infos:
        for key, value in info.items():
            if key not in batched:
                batched[key] = np.full(num_envs, None, dtype=object)
                batched[f"_{key}"] = np.zeros(num_envs, dtype=bool)
            batched[key][i] = value
            batched[f"_{key}"][i] = True
    return batched


class ThreadedVectorEnv(VectorEnv[Any, Any, Any]):
    """A vector env whose copies are made, reset and stepped in a thread pool: one process, no
    pickling, yet the copies' I/O (a container's shell, a database server) overlaps. Each
    copy is only ever used by one thread at a time.

    Autoreset is disabled, the one mode this class implements: reset the copies that
    finished with ``reset(options={"reset_mask": mask})``; stepping a finished copy raises.

    Example::

        vec = ThreadedVectorEnv([lambda: gym.make("AgentUnit/DB-v0", backend="sqlite")] * 4)
        obs, infos = vec.reset(seed=0)
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env[str, str]]]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(env_fns)), thread_name_prefix="env")
        try:
            self.envs = list(self._pool.map(lambda fn: fn(), env_fns))  # containers start side by side
        except BaseException:
            self._pool.shutdown(wait=False)
            raise
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.metadata = {**first.metadata, "autoreset_mode": AutoresetMode.DISABLED}
        self.render_mode = first.render_mode
        self.spec = first.spec
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._observations: Any = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        self._env_obs: list[Any] = [None] * self.num_envs
        self._ended = np.zeros(self.num_envs, dtype=bool)

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeds = list(seed) if isinstance(seed, list) else [
            None if seed is None else seed + i for i in range(self.num_envs)]
        options = dict(options or {})
        mask = options.pop("reset_mask", np.ones(self.num_envs, dtype=bool))
        chosen = [i for i in range(self.num_envs) if mask[i]]
        results = list(self._pool.map(lambda i: self.envs[i].reset(seed=seeds[i], options=options or None), chosen))
        for i, (obs, _) in zip(chosen, results, strict=True):
            self._env_obs[i] = obs
            self._ended[i] = False
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        infos = batch_infos([(i, info) for i, (_, info) in zip(chosen, results, strict=True)], self.num_envs)
        return deepcopy(self._observations), infos

    def step(self, actions: Any, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray,
                                                                       dict[str, Any]]:
        """Step every copy in the pool; ``timeout`` bounds the wait (``TimeoutError`` past it).

        Raises:
            EpisodeStateError: a copy's episode ended and it was not reset.
        """
        if bool(np.any(self._ended)):
            raise EpisodeStateError("step() on a copy whose episode ended: reset it with options['reset_mask'].")
        pairs = list(zip(self.envs, iterate(self.action_space, actions), strict=True))
        results = list(self._pool.map(lambda pair: pair[0].step(pair[1]), pairs, timeout=timeout))
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        for i, (obs, reward, terminated, truncated, _) in enumerate(results):
            self._env_obs[i] = obs
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._ended = np.logical_or(terminations, truncations)
        infos = batch_infos([(i, r[4]) for i, r in enumerate(results)], self.num_envs)
        return deepcopy(self._observations), rewards, terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name`` on every copy (or read it when it is not callable)."""
        results = []
        for env in self.envs:
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(env.get_wrapper_attr(name) for env in self.envs)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` on each copy: one value per copy, or the same value on all."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ConfigError(f"set_attr needs one value per copy ({self.num_envs}), got {len(values)}.")
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def close_extras(self, **kwargs: Any) -> None:
        envs = getattr(self, "envs", [])
        try:
            # Side by side: a copy's close can take 0.1-0.2 s (removing its containers). A pool
            # of its own, since a copy's step that timed out may still hold the other.
            with ThreadPoolExecutor(max_workers=max(1, len(envs)), thread_name_prefix="env-close") as closer:
                list(closer.map(lambda env: env.close(), envs))
        finally:
            self._pool.shutdown(wait=False)


def make_vector_env(fns: list[Callable[[], gym.Env[str, str]]],
                    mode: VectorMode) -> SyncVectorEnv | AsyncVectorEnv | ThreadedVectorEnv:
    """A vector env over ``fns`` that the runner resets itself (autoreset disabled).

    ``sync``: gymnasium's SyncVectorEnv, copies stepped one after another; ``threads``:
    :class:`ThreadedVectorEnv`, copies stepped in a thread pool; ``async``: gymnasium's
    AsyncVectorEnv, a process per copy.

    Raises:
        ConfigError: an unknown mode.
    """
    if mode == "sync":
        return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
    if mode == "threads":
        return ThreadedVectorEnv(fns)
    if mode == "async":
        # Text spaces cannot live in shared memory; observations travel through the pipes.
        return AsyncVectorEnv(fns, shared_memory=False, autoreset_mode=AutoresetMode.DISABLED)
    raise ConfigError(f"vector mode must be 'sync', 'threads' or 'async', got {mode!r}.")


__all__ = ["ThreadedVectorEnv", "batch_infos", "make_vector_env"]
