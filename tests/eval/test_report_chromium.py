"""report.html in a real headless Chromium: it renders, its script runs, no console errors, a screenshot is taken.

Skipped when Chromium is not installed, unless AGENTUNIT_REQUIRE_CHROMIUM=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agentunit_gym.eval.agents.builtin import resolve_agent
from agentunit_gym.eval.report.html import write_report
from agentunit_gym.eval.report.summary import summarize
from agentunit_gym.eval.run.runner import EvalConfig, run_episodes
from tests.core.toy import ToyEnv

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and Path(p).exists()), None)
CONSOLE = re.compile(r"INFO:CONSOLE[^\]]*\]\s*(.*)")


@pytest.fixture(autouse=True)
def need_chromium() -> None:
    if CHROMIUM is None:
        if os.environ.get("AGENTUNIT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("AGENTUNIT_REQUIRE_CHROMIUM=1 but no chromium is installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed")


def chromium(page: Path, tmp: Path, *extra: str) -> tuple[str, list[str]]:
    """Load ``page`` headless; return stdout and the console messages Chromium logged."""
    assert CHROMIUM is not None
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
            "--enable-logging=stderr", "--v=0", *extra, page.resolve().as_uri()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [m.group(1) for m in CONSOLE.finditer(done.stderr)]


def make_run(tmp_path: Path) -> Path:
    label, factory = resolve_agent("random")
    run_dir = tmp_path / "run"
    run_episodes(EvalConfig(envs=("Toy-v0",), agent="random", runs=3), factory, label, run_dir,
                 env_factory=lambda e, o: ToyEnv())
    summarize(run_dir)
    return write_report(run_dir)


def test_console_check_catches_errors(tmp_path: Path) -> None:
    # The positive control: the check below would see a broken script.
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>missing_function();</script></body></html>")
    _, messages = chromium(bad, tmp_path, "--dump-dom")
    assert any("Uncaught" in m for m in messages)


def test_report_renders_without_console_errors(tmp_path: Path) -> None:
    report = make_run(tmp_path)
    dom, messages = chromium(report, tmp_path, "--dump-dom")
    assert messages == []
    # The trace viewer's script ran: it listed the 6 episodes and opened the first one.
    assert dom.count('<div class="sel">') == 1
    assert len(re.findall(r"Toy-v0 t[12] run \d", dom)) >= 6
    assert "Step 1" in dom
    shot = tmp_path / "report.png"
    _, messages = chromium(report, tmp_path, f"--screenshot={shot}", "--window-size=1280,1600")
    assert messages == []
    assert shot.exists() and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class ScriptAgent:
    """Replies with text that would break a naively embedded trace viewer."""

    def act(self, observation: str, info: dict[str, object]) -> str:
        return "</script><!-- <script>alert(1)</script> Act: answer(42)"


def test_hostile_text_in_traces_stays_text(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_episodes(EvalConfig(envs=("Toy-v0",), agent="x"), ScriptAgent, "x", run_dir,
                 env_factory=lambda e, o: ToyEnv())
    summarize(run_dir)
    dom, messages = chromium(write_report(run_dir), tmp_path, "--dump-dom")
    assert messages == []
    assert "&lt;/script&gt;&lt;!-- &lt;script&gt;alert(1)" in dom  # shown as text by the viewer


def test_judged_report_shows_criteria_and_the_judges_verdict(tmp_path: Path) -> None:
    from agentunit_gym.eval.agents.fake_server import FakeChatServer
    from agentunit_gym.eval.agents.model_client import OpenAIConfig
    from agentunit_gym.eval.judge import JudgeConfig
    from agentunit_gym.eval.judging import judge_and_report
    from tests.eval.judgekit import ScriptedJudge, write_run

    run_dir = tmp_path / "run"
    write_run(run_dir, [("t1", "echo solved", True, "Print it."), ("t2", "echo no", False, "Print that.")])
    with FakeChatServer(ScriptedJudge()) as server:
        _, _, report = judge_and_report(run_dir, JudgeConfig(OpenAIConfig(model="j", base_url=server.base_url)))
    dom, messages = chromium(report, tmp_path, "--dump-dom")
    assert messages == []
    assert "Judged metrics and criteria" in dom and "does not separate" in dom
    # The viewer opened the first episode with the judge's verdict and reason.
    assert "Judge: goal fidelity 0.9, achieved: true" in dom and "The agent solved it." in dom
