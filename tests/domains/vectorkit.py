"""Helpers for the vector-env, pickling and group tests: every registered domain's env on its
embedded backend with a few replies of each kind (derived from its bundled tasks, plus
hand-written ones for the built-in envs), and unbatching gymnasium's vector ``info``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from agentunit_gym.core.domain import Domain
from tests.domains.conformkit import huge_reply, invalid_replies, valid_replies

HUGE = 100_000
"""Characters in a huge reply."""


@dataclass(frozen=True)
class EnvCase:
    env_id: str
    kwargs: dict[str, Any]
    valid: tuple[str, ...]
    """Replies that parse to an action (some run, some commit, some fail as commands)."""
    invalid: tuple[str, ...]
    """Replies that do not (no action, unknown tool)."""
    huge_valid: str


OS = EnvCase(
    "AgentUnit/OS-v0", {"backend": "local"},
    valid=("Think: look.\nAct: bash\n```bash\necho hi\n```", "Act: bash\n```bash\nexit 3\n```", "Act: answer(42)",
           "Act: finish"),
    invalid=("I am not sure what to do.", "Act: launch(rocket)"),
    huge_valid="Act: answer(" + "x" * HUGE + ")",
)
DB = EnvCase(
    "AgentUnit/DB-v0", {"backend": "sqlite"},
    valid=("Action: Operation\n```sql\nSELECT 1;\n```", "Action: Operation\n```sql\nSELEC nonsense\n```",
           'Action: Answer\nFinal Answer: ["1"]', "Action: Answer\nFinal Answer: []"),
    invalid=("Let me think.", "Action: Launch"),
    huge_valid="Action: Operation\n```sql\nSELECT '" + "x" * HUGE + "';\n```",
)
KG = EnvCase(
    "AgentUnit/KG-v0", {"backend": "embedded"},
    valid=("Thought: look\nAction: get_relations(France)", "Action: count(#0)"),
    invalid=("Final Answer: #0", "Action: fly(x)", "no idea"),
    huge_valid="Action: get_relations(" + "x" * HUGE + ")",
)
WEBSHOP = EnvCase(
    "AgentUnit/WebShop-v0", {"backend": "embedded"},
    valid=("Thought: go\nAction: search[red shoes]", "Action: search[blue cotton shirt]"),
    invalid=("Action: click[Buy Now]", "Action: jump[x]", "buy it"),
    huge_valid="Action: search[" + "shoe " * (HUGE // 5) + "]",
)
CASES = {"os": OS, "db": DB, "kg": KG, "webshop": WEBSHOP}
"""Hand-written replies for the built-in envs (failing commands, near misses), added to the derived ones."""


def env_case(domain: Domain) -> EnvCase:
    """The case of ``domain``'s first env on its embedded backend: reference steps of its
    bundled tasks as valid replies, prose and an unknown tool as invalid ones, and the
    hand-written replies of :data:`CASES` when it is a built-in env."""
    env_id, kwargs = domain.env_ids[0], {"backend": domain.embedded_backend.name}
    env = gym.make(env_id, **kwargs)
    try:
        base = env.unwrapped
        valid, huge = valid_replies(base), huge_reply(base)  # type: ignore[arg-type]
    finally:
        env.close()
    curated = next((c for c in CASES.values() if c.env_id == env_id), None)
    if curated is None:
        return EnvCase(env_id, kwargs, valid=valid, invalid=invalid_replies(), huge_valid=huge)
    return EnvCase(env_id, {**curated.kwargs, **kwargs}, valid=curated.valid + valid,
                   invalid=curated.invalid + invalid_replies(), huge_valid=curated.huge_valid)


def replies(case: EnvCase) -> list[str]:
    """Every reply kind: valid, invalid, empty, huge garbage, huge valid."""
    return [*case.valid, *case.invalid, "", "y" * HUGE, case.huge_valid]


MEASUREMENTS = frozenset({"timing", "duration_s"})
"""Keys whose values are measurements (times), not what the env did: left out of comparisons."""


def per_copy(batched: dict[str, Any], index: int) -> dict[str, Any]:
    """Copy ``index``'s ``info`` out of a gymnasium vector ``info`` (values under ``key``, the
    mask of the copies that reported it under ``_key``), nested dicts included."""
    single: dict[str, Any] = {}
    for key, value in batched.items():
        if key.startswith("_") and key[1:] in batched:
            continue
        mask = batched.get(f"_{key}")
        if mask is None or not bool(mask[index]):
            continue
        if isinstance(value, dict):
            single[key] = per_copy(value, index)
        else:
            item = value[index]
            single[key] = item.item() if isinstance(item, np.generic) else item
    return single


def comparable(value: Any) -> Any:
    """``value`` without measurements, with enums as their values (a batched copy went through
    a pickle in an AsyncVectorEnv: equal, but not the same object)."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in MEASUREMENTS}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    return value


def type_paths(info: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"score.components.f1": "float", ...}``: the kind of every leaf, for type-stability checks.
    Kinds are those gymnasium batches differently: bool, int, float, dict, and everything else."""
    kinds: dict[str, str] = {}
    for key, value in info.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            kinds[path] = "dict"
            kinds.update(type_paths(value, path + "."))
        elif type(value) in (bool, int, float):
            kinds[path] = type(value).__name__
        elif value is None:
            kinds[path] = "None"
        else:
            kinds[path] = "object"
    return kinds
