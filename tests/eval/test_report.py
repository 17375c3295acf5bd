"""report.html without a browser: every value is escaped text and the page needs nothing from outside."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentunit_gym.eval.report.html import write_report
from agentunit_gym.eval.report.summary import summarize
from agentunit_gym.eval.run.runner import EvalConfig, run_episodes
from tests.core.toy import ToyEnv

HOSTILE = "<img src=x onerror=alert(1)>"


class HostileAgent:
    def act(self, observation: str, info: dict[str, object]) -> str:
        return f"</script>{HOSTILE} Act: answer(42)"


def test_values_are_text_and_the_page_is_self_contained(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_episodes(EvalConfig(envs=("Toy-v0",), agent=HOSTILE), HostileAgent, HOSTILE, run_dir,
                 env_factory=lambda e, o: ToyEnv())
    summarize(run_dir)
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert HOSTILE not in page and "<img" not in page  # the agent's name (title, meta, tables) is escaped
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") >= 3
    # The traces are JSON inside one inert script element: a "<" in them is \u003c.
    [data] = re.findall(r'<script id="trace-data" type="application/json">(.*?)</script>', page, re.DOTALL)
    assert "<" not in data and json.loads(data)[0]["steps"][0]["action"].startswith(f"</script>{HOSTILE}")
    # Self-contained: no element loads anything (the SVG namespace is a name, not a fetch).
    assert not re.search(r"<(script|img|link|iframe)[^>]*\b(src|href)=", page)
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}
