"""A scripted judge for the fake chat server: critic, quantifier and verifier answers, and
hand-made runs to judge."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentunit_gym.eval.judge.prompts import CRITIC_SYSTEM, QUANTIFIER_SYSTEM
from agentunit_gym.eval.record.records import EpisodeRecord, RecordWriter, RunPaths
from tests.eval.tracekit import step, trace

CRITERION_LINE = re.compile(r"^- (\S+): .* Accepted values \(worst to best\): (\[.*\])$", re.MULTILINE)

PROPOSED = [
    {"name": "solves_it", "description": "Does the agent do what was asked?",
     "accepted_values": ["no", "partly", "yes"]},
    {"name": "flaky", "description": "A criterion the quantifier cannot settle.", "accepted_values": ["a", "b"]},
    {"name": "flat", "description": "A criterion every episode meets.", "accepted_values": ["low", "high"]},
]


class ScriptedJudge:
    """A responder: the critic proposes :data:`PROPOSED`; the quantifier reads the transcript and
    calls an episode achieved when an action says ``solved``: ``solves_it`` follows that,
    ``flaky`` alternates between calls, ``flat`` is always ``high``, any other criterion gets its
    best value for an achieved episode and its worst otherwise.

    ``special`` maps a marker in the transcript to a reply that replaces the JSON answer.
    """

    def __init__(self, special: dict[str, Callable[[], dict[str, Any]]] | None = None) -> None:
        self.special = special or {}
        self.calls: list[str] = []
        self._flip = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        if system == CRITIC_SYSTEM:
            self.calls.append("critic")
            return {"role": "assistant", "content": "Here are my criteria:\n```json\n"
                    + json.dumps({"criteria": PROPOSED}) + "\n```"}
        assert system == QUANTIFIER_SYSTEM
        self.calls.append(user)
        for marker, reply in self.special.items():
            if marker in user:
                return reply()
        achieved = "solved" in user
        values: dict[str, str] = {}
        for name, accepted in CRITERION_LINE.findall(user):
            options = json.loads(accepted)
            if name == "flaky":
                with self._lock:
                    self._flip += 1
                    values[name] = options[self._flip % 2]
            elif name == "flat":
                values[name] = "high"
            else:
                values[name] = options[-1] if achieved else options[0]
        answer = {"goal_fidelity": 0.9 if achieved else 0.2, "achieved": achieved, "criteria": values,
                  "reason": "The agent " + ("solved it." if achieved else "did not solve it.")}
        return {"role": "assistant", "content": json.dumps(answer)}


def write_run(run_dir: Path, episodes: list[tuple[str, str, bool, str]], *, domain: str = "os",
              env_id: str = "AgentUnit/OS-v0", category: str = "general") -> list[str]:
    """A finished run without an env: ``(task_id, action, env success, instruction)`` per episode.

    Returns:
        The episode keys.
    """
    paths = RunPaths(run_dir)
    paths.config.parent.mkdir(parents=True, exist_ok=True)
    if not paths.config.exists():
        paths.config.write_text(json.dumps({"envs": [env_id], "agent": "scripted", "seed": 0}), encoding="utf-8")
    writer = RecordWriter(paths)
    keys = []
    for task_id, action, success, instruction in episodes:
        t = trace(task_id, [step(1, arg=action, raw=f"Act: bash\n```bash\n{action}\n```")], success=success,
                  domain=domain, env_id=env_id, category=category)
        t = t.model_copy(update={"instruction": instruction, "episode_id": f"{env_id}-{task_id}"})
        key = f"{env_id}|{task_id}|0"
        writer.write(EpisodeRecord(key=key, env_id=env_id, task_id=task_id, run=0, seed=0, agent="scripted",
                                   status="done", success=success, reward=float(success), steps=1), t)
        keys.append(key)
    writer.close()
    return keys
