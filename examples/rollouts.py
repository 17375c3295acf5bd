"""Collect chat trajectories from 8 vector copies of one env, for a trainer to read.

Each copy is the env under :class:`~agentunit_gym.wrappers.ChatMessages`, so every observation
is the conversation as OpenAI chat messages (built as the evaluator's OpenAI agent builds it).
The copies run in lockstep in a gymnasium ``SyncVectorEnv``; a policy replies for each copy:
a model behind an OpenAI-compatible endpoint (``--base-url``, ``--model``; the built-in
``OpenAIChatAgent``), or the random agent when no endpoint is given. Every finished episode
becomes one row with the columns of ``agentunit-gym export`` (docs/training.md), written to
Parquet (``.parquet``, needs ``pip install "agentunit-gym[export]"``) or JSON Lines.

Run it::

    python examples/rollouts.py --env DB-v0 --backend sqlite --episodes 1000 --output rollouts.parquet
    python examples/rollouts.py --env DB-v0 --base-url http://localhost:8000/v1 --model my-model --output r.jsonl

Copies whose episode ended are reset (``reset_mask``) with the next seed of the run, so each
row's ``seed`` replays its episode. The env's ``info`` batches as it is (every key on every
step with one type), but a policy wants each copy's ``info`` as one dict, not one array per
key: :class:`TrajectoryInfo` keeps it whole in ``full_info`` (read through
``VectorEnv.get_attr``) and hands the vector env the few strings the loop reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import agentunit_gym  # noqa: F401 - registers the AgentUnit/* ids
from agentunit_gym.errors import AgentUnitError
from agentunit_gym.eval.agents import RandomAgent, act_blocking, reset_agent, resolve_agent
from agentunit_gym.eval.record.export import trajectory_row, write_rows
from agentunit_gym.tasks.spec import AnswerKey
from agentunit_gym.wrappers import ChatMessages


class TrajectoryInfo(gym.Wrapper[list[dict[str, Any]], str, list[dict[str, Any]], str]):
    """Give the vector env only string info entries (``task_id``, ``finish_reason``, ``score`` as
    JSON), present on every step, and keep the env's whole ``info`` in :attr:`full_info`
    (read through ``VectorEnv.get_attr``) for the agents."""

    def __init__(self, env: gym.Env[list[dict[str, Any]], str]) -> None:
        super().__init__(env)
        self.full_info: dict[str, Any] = {}
        self.answer_key: AnswerKey | None = None
        """The episode's task's answer key (the row's ``reward_model``), read at reset."""

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self.full_info = {**info, "seed": seed}
        task = getattr(self.env.unwrapped, "task", None)
        self.answer_key = task.answer_key() if task is not None else None
        return observation, self._small(info)

    def step(self, action: str) -> tuple[list[dict[str, Any]], SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.full_info = {**self.full_info, **info}
        return observation, reward, terminated, truncated, self._small(info)

    def _small(self, info: dict[str, Any]) -> dict[str, Any]:
        finish = info.get("finish_reason")
        score = info.get("score")
        return {"task_id": str(self.full_info.get("task_id", "")),
                "finish_reason": getattr(finish, "value", finish) or "",
                "score": json.dumps(score, default=str) if score is not None else ""}


def make_copy(env_id: str, backend: str | None, style: str) -> gym.Env[list[dict[str, Any]], str]:
    """One vector copy: the env, its conversation as chat messages, vector-safe info."""
    options = {"backend": backend} if backend else {}
    return TrajectoryInfo(ChatMessages(gym.make(env_id, **options), style=style))  # type: ignore[arg-type]


def collect(env_id: str = "AgentUnit/DB-v0", *, episodes: int = 1000, num_envs: int = 8, backend: str | None = None,
            base_url: str | None = None, model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
            style: str = "tools", seed: int = 0) -> list[dict[str, Any]]:
    """Play ``episodes`` episodes over ``num_envs`` vector copies and return their rows.

    Args:
        env_id: the env (``DB-v0`` is short for ``AgentUnit/DB-v0``).
        episodes: rows to collect; episodes still running when they are collected are dropped.
        num_envs: vector copies.
        backend: the env's backend (default: the env picks).
        base_url, model: an OpenAI-compatible endpoint and model; None plays the random agent.
        api_key_env: the variable holding the endpoint's key (loopback endpoints need none).
        style: ``tools`` or ``react``: how replies become messages (and the model's mode).
        seed: episode k of the run is reset with seed ``seed + k``.

    Returns:
        One row per finished episode (the columns of ``agentunit_gym.eval.record.export.TRAJECTORY_COLUMNS``).
    """
    full_id = env_id if "/" in env_id else f"AgentUnit/{env_id}"
    if base_url or model:
        label, factory = resolve_agent(f"openai:{model or 'default'}", base_url=base_url, api_key_env=api_key_env,
                                       check_endpoint=True, mode=style)
    else:
        label, factory = "random", RandomAgent
    agents = [factory() for _ in range(num_envs)]
    envs = SyncVectorEnv([lambda: make_copy(full_id, backend, style) for _ in range(num_envs)],
                         autoreset_mode=AutoresetMode.DISABLED)
    rows: list[dict[str, Any]] = []
    seeds: list[int | None] = [seed + i for i in range(num_envs)]
    next_seed = seed + num_envs
    observations, _ = envs.reset(seed=seeds)
    prompts = [len(o) for o in observations]
    rewards: list[list[float]] = [[] for _ in range(num_envs)]
    with ThreadPoolExecutor(num_envs) as pool:
        infos = list(envs.get_attr("full_info"))
        for agent, info in zip(agents, infos, strict=True):
            reset_agent(agent, info)
        while len(rows) < episodes:
            texts = [str(conversation[-1]["content"]) for conversation in observations]
            actions = tuple(pool.map(act_blocking, agents, texts, infos))
            observations, reward, terminated, truncated, small = envs.step(actions)
            ended = np.logical_or(terminated, truncated)
            infos = list(envs.get_attr("full_info"))
            answer_keys = list(envs.get_attr("answer_key"))
            for i in range(num_envs):
                rewards[i].append(float(reward[i]))
                if not ended[i] or len(rows) >= episodes:
                    continue
                score = json.loads(small["score"][i]) if small["score"][i] else None
                rows.append(trajectory_row(
                    observations[i], prompt_length=prompts[i], env_id=full_id, task_id=small["task_id"][i],
                    split=str(infos[i].get("split") or ""), backend=str(infos[i].get("backend") or ""),
                    answer=answer_keys[i], seed=seeds[i], rewards=rewards[i],
                    reward=sum(rewards[i]), success=bool(score and score.get("success")), score=score,
                    finish_reason=small["finish_reason"][i] or None, tools=infos[i].get("tools") or [],
                    agent=label, index=len(rows), episode=f"{full_id}|{small['task_id'][i]}|{seeds[i]}"))
            if not ended.any() or len(rows) >= episodes:
                continue
            # Reset the copies whose episode ended, each with the run's next seed.
            for i in map(int, np.flatnonzero(ended)):
                seeds[i], next_seed, rewards[i] = next_seed, next_seed + 1, []
            fresh, _ = envs.reset(seed=seeds, options={"reset_mask": ended})
            observations = tuple(fresh[i] if ended[i] else observations[i] for i in range(num_envs))
            infos = list(envs.get_attr("full_info"))
            for i in map(int, np.flatnonzero(ended)):
                prompts[i] = len(observations[i])
                reset_agent(agents[i], infos[i])
    envs.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description="Collect chat trajectories from vector copies of one AgentUnit env.")
    parser.add_argument("--env", default="DB-v0", help="env id (default DB-v0)")
    parser.add_argument("--backend", default=None, help="the env's backend (default: the env picks)")
    parser.add_argument("--episodes", "-n", type=int, default=1000, help="episodes to collect (default 1000)")
    parser.add_argument("--num-envs", type=int, default=8, help="vector copies (default 8)")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint (default: the random agent)")
    parser.add_argument("--model", default=None, help="the model name the endpoint serves")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY")
    parser.add_argument("--style", choices=["tools", "react"], default="tools")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", "-o", type=Path, default=Path("rollouts.parquet"),
                        help=".parquet (needs agentunit-gym[export]) or .jsonl (default rollouts.parquet)")
    args = parser.parse_args()
    try:
        rows = collect(args.env, episodes=args.episodes, num_envs=args.num_envs, backend=args.backend,
                       base_url=args.base_url, model=args.model, api_key_env=args.api_key_env, style=args.style,
                       seed=args.seed)
        write_rows(rows, args.output)
    except AgentUnitError as exc:
        print(f"rollouts: {exc}", file=sys.stderr)
        return 1
    solved = sum(r["success"] for r in rows)
    print(f"{len(rows)} episodes written to {args.output} ({solved} solved, "
          f"mean reward {np.mean([r['reward'] for r in rows]) if rows else 0:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
