"""A random shopper: the floor a WebShop agent's mean reward is compared with.

The generic random agent (``--agent random``) fills tool arguments with words and almost
never names a clickable, so it buys nothing. This one plays by the page: where there is
a search bar it searches three words of the instruction; elsewhere it clicks one of the
listed clickables uniformly at random (WebShop's random baseline picks uniformly among
the available actions). Use it with
``agentunit-gym eval --env WebShop-v0 --agent agentunit_gym.domains.webshop.baselines:RandomShopper``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from agentunit_gym.core.info import reset_seed

_AVAILABLE = re.compile(r"Available Actions:\n(\{.*\})\s*$", re.DOTALL)
_WORD = re.compile(r"[a-z][a-z'-]+")
_STOP = frozenset("i a an and the for in of with to is that it me my need want looking find buy get price lower "
                  "than dollars under which am please".split())


class RandomShopper:
    """Uniform over the page's actions; seeded by the episode's seed when the evaluator gives one."""

    name = "random-shopper"

    def __init__(self, seed: int | None = 0) -> None:
        self._rng = np.random.default_rng(seed)
        self._words: list[str] = ["shirt"]

    def reset(self, info: dict[str, Any]) -> None:
        seed = reset_seed(info)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        words = [w for w in _WORD.findall(str(info.get("instruction", "")).lower()) if w not in _STOP]
        self._words = words or ["shirt"]

    def act(self, observation: str, info: dict[str, Any]) -> str:
        match = _AVAILABLE.search(observation)
        available: dict[str, Any] = json.loads(match.group(1)) if match else {"has_search_bar": True}
        if available.get("has_search_bar"):
            count = min(3, len(self._words))
            picks = self._rng.choice(len(self._words), size=count, replace=False)
            return f"Thought:\nI search.\n\nAction:\nsearch[{' '.join(self._words[int(i)] for i in picks)}]"
        clickables = [c for c in available.get("clickables", []) if c != "search"]
        if not clickables:
            return "Thought:\nNothing to click.\n\nAction:\nclick[back to search]"
        choice = clickables[int(self._rng.integers(len(clickables)))]
        return f"Thought:\nI click.\n\nAction:\nclick[{choice}]"
