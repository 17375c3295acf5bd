"""The MCP server through the SDK's own client: over stdio (the server a subprocess the client
spawns) and over streamable HTTP (a server subprocess on a free loopback port).

Each test plays whole episodes as a remote agent would: list the tools, read the task, call
the tools (the task's reference solution: an oracle), read the score from the final result.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import gymnasium as gym
import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.core.actions import split_json_call  # noqa: E402
from agentunit_gym.core.registry import env_ids  # noqa: E402
from agentunit_gym.eval.record.export import export_run  # noqa: E402
from agentunit_gym.eval.record.records import RunPaths, load_trace, read_records  # noqa: E402
from agentunit_gym.serve.mcp_server import TASK_PROMPT, TASK_URI  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 120.0
"""Every exchange with a server finishes within this, or the test fails (a KG server's first start builds its store)."""

T = TypeVar("T")

Call = tuple[str, dict[str, Any]]


def oracle(env_id: str, backend: str) -> tuple[str, list[Call], str, list[dict[str, Any]]]:
    """A task whose reference solution needs no earlier output: its id, its calls, its reset
    prompt at seed 0, and the env's tool schemas."""
    env = gym.make(env_id, backend=backend)
    base: Any = env.unwrapped
    try:
        task = next(t for t in base.tasks if t.reference_solution and not any(s.from_output
                                                                           for s in t.reference_solution))
        calls = []
        for step in task.reference_solution:
            split = split_json_call(base.render_action(step, "json"))
            assert isinstance(split, tuple)
            calls.append(split)
        prompt, info = env.reset(seed=0, options={"task_id": task.id})
        return task.id, calls, prompt, info["tools"]
    finally:
        env.close()


def run(fn: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        with anyio.fail_after(DEADLINE_S):
            return await fn()

    return anyio.run(bounded)


def stdio_params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "agentunit_gym", "mcp", *args], cwd=str(ROOT),
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})


@asynccontextmanager
async def stdio_session(log: Path, *args: str) -> Any:
    with log.open("w", encoding="utf-8") as errlog:
        async with Client(stdio_client(stdio_params(*args), errlog=errlog)) as client:
            yield client


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def play(client: Client, calls: list[Call]) -> Any:
    """Call each tool in turn; every result but the last leaves the episode running."""
    result: Any = None
    for i, (tool, arguments) in enumerate(calls):
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, text_of(result)
        if i < len(calls) - 1:
            assert result.structured_content is None, f"the episode ended early at {tool}: {text_of(result)}"
    return result


# ------------------------------------------------------------------------------------------ stdio


def test_stdio_tools_task_and_an_oracle_episode_to_score_1_on_db(tmp_path: Path) -> None:
    task_id, calls, prompt, schemas = oracle("AgentUnit/DB-v0", "sqlite")
    out = tmp_path / "run"

    async def session() -> dict[str, Any]:
        async with stdio_session(tmp_path / "server.log", "--env", "DB-v0", "--backend", "sqlite", "--task-id",
                                 task_id, "--seed", "0", "--output", str(out)) as client:
            assert "agentunit://task" in (client.instructions or "")
            listed = (await client.list_tools()).tools
            assert [(t.name, t.description, t.input_schema) for t in listed] == [
                (s["function"]["name"], s["function"]["description"], s["function"]["parameters"]) for s in schemas]
            resources = (await client.list_resources()).resources
            assert [str(r.uri) for r in resources] == [TASK_URI]
            task_text = (await client.read_resource(TASK_URI)).contents[0]
            assert getattr(task_text, "text", None) == prompt
            message = (await client.get_prompt(TASK_PROMPT)).messages[0]
            assert message.role == "user" and getattr(message.content, "text", None) == prompt

            invalid = await client.call_tool("execute_sql", {"statement": "SELECT 1"})
            assert invalid.is_error and invalid.structured_content is None
            assert "has no parameter 'statement'" in text_of(invalid) and "'query'" in text_of(invalid)

            final = await play(client, calls)
            assert "Episode finished (complete): reward 1" in text_of(final)
            after = await client.call_tool(calls[0][0], calls[0][1])
            assert after.is_error and "already ended" in text_of(after)
            assert after.structured_content == final.structured_content
            result: dict[str, Any] = final.structured_content
            return result

    result = run(session)
    assert result["finished"] is True and result["finish_reason"] == "complete"
    assert result["reward"] == 1.0 and result["success"] is True and result["task_id"] == task_id
    assert result["steps"] == len(calls) + 1  # the invalid call counts: the env went on past it
    assert result["score"]["success"] is True

    # Recorded as the evaluator records: one done record, its trace, and an export row.
    (record,) = read_records(RunPaths(out).episodes)
    assert (record.env_id, record.task_id, record.status, record.success, record.reward, record.seed) == (
        "AgentUnit/DB-v0", task_id, "done", True, 1.0, 0)
    assert record.agent.startswith("mcp") and record.finish_reason == "complete" and record.steps == len(calls) + 1
    trace = load_trace(out, record)
    assert trace is not None and trace.prompt == prompt and len(trace.steps) == len(calls) + 1
    assert trace.steps[0].action_error is not None and trace.score is not None and trace.score.success
    assert json.loads(RunPaths(out).config.read_text())["agent"] == "mcp"
    summary = json.loads(RunPaths(out).summary.read_text())  # written when the server stopped, as eval does
    assert summary["status"] == {"done": 1} and RunPaths(out).report.is_file()
    exported = export_run(out, tmp_path / "rows.jsonl")
    assert exported.rows == 1 and not exported.skipped
    row = json.loads((tmp_path / "rows.jsonl").read_text().splitlines()[0])
    assert row["reward"] == 1.0 and row["task_id"] == task_id and row["env_id"] == "AgentUnit/DB-v0"
    assert any(m.get("tool_calls") for m in row["messages"] if m["role"] == "assistant")  # replayed as tool calls


def test_stdio_oracle_episode_to_score_1_on_kg_embedded(tmp_path: Path) -> None:
    task_id, calls, prompt, schemas = oracle("AgentUnit/KG-v0", "embedded")

    async def session() -> Any:
        async with stdio_session(tmp_path / "server.log", "--env", "KG-v0", "--backend", "embedded",
                                 "--task-id", task_id) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == [s["function"]["name"] for s in schemas] and len(names) == 8  # seven tools and the answer
            assert getattr((await client.read_resource(TASK_URI)).contents[0], "text", None) == prompt
            return (await play(client, calls)).structured_content

    result = run(session)
    assert (result["finish_reason"], result["reward"], result["success"]) == ("complete", 1.0, True)


def test_stdio_session_closed_mid_episode_is_recorded_as_abandoned(tmp_path: Path) -> None:
    task_id, calls, _prompt, _schemas = oracle("AgentUnit/DB-v0", "sqlite")
    out = tmp_path / "run"

    async def session() -> None:
        async with stdio_session(tmp_path / "server.log", "--env", "DB-v0", "--backend", "sqlite",
                                 "--task-id", task_id, "--output", str(out)) as client:
            result = await client.call_tool("execute_sql", {"query": "SELECT 1"})
            assert not result.is_error and text_of(result) == "[(1,)]"

    run(session)
    (record,) = read_records(RunPaths(out).episodes)
    assert (record.status, record.finish_reason, record.steps, record.success) == ("agent_error", "error", 1, False)
    assert "session closed" in record.error
    assert export_run(out, tmp_path / "rows.jsonl").skipped == {"agent_error": 1}


# ------------------------------------------------------------------------------------------- http


class HttpServer:
    """``agentunit-gym mcp --transport http`` in a subprocess on a free loopback port."""

    def __init__(self, tmp: Path, *args: str, token: str | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("AGENTUNIT_MCP_TOKEN", None)
        if token:
            env["AGENTUNIT_MCP_TOKEN"] = token
        self.log = tmp / "http-server.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentunit_gym", "mcp", "--transport", "http", "--port", "0", *args],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.url = self._wait_ready()

    def _pump(self) -> None:
        assert self.process.stderr is not None
        with self.log.open("w", encoding="utf-8") as log:
            for line in self.process.stderr:
                log.write(line)
                log.flush()
                self.lines.put(line)

    def _wait_ready(self) -> str:
        """The URL from the server's ready line, then one request answered: a poll with a deadline."""
        deadline = time.monotonic() + DEADLINE_S
        url = None
        while url is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None:
                raise AssertionError(f"the MCP server did not start; its log: {self.log.read_text()[-2000:]}")
            try:
                found = re.search(r" at (http://\S+)", self.lines.get(timeout=remaining))
            except queue.Empty:
                continue
            url = found.group(1) if found else None
        try:  # the socket listens before the app starts; this answers once it has
            urllib.request.urlopen(urllib.request.Request(url, method="GET"),
                                   timeout=max(1.0, deadline - time.monotonic()))
        except urllib.error.HTTPError:
            pass  # any HTTP answer will do
        return url

    def stop(self) -> str:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        return self.log.read_text()


TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def db_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Path, str, list[Call]]]:
    task_id, calls, _prompt, _schemas = oracle("AgentUnit/DB-v0", "sqlite")
    tmp = tmp_path_factory.mktemp("mcp-http")
    out = tmp / "run"
    server = HttpServer(tmp, "--env", "DB-v0", "--backend", "sqlite", "--task-id", task_id, "--seed", "0",
                        "--output", str(out), token=TOKEN)
    try:
        yield server, out, task_id, calls
    finally:
        server.stop()


def http_client(url: str, token: str | None = TOKEN, mode: str = "auto") -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(DEADLINE_S))
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def test_http_two_sessions_play_two_episodes_and_both_are_recorded(db_http: Any) -> None:
    server, out, task_id, calls = db_http

    async def sessions() -> tuple[Any, Any]:
        async with http_client(server.url) as first, http_client(server.url) as second:
            assert first.protocol_version == second.protocol_version == "2025-11-25"  # sessions: the handshake era
            assert [t.name for t in (await first.list_tools()).tools] == ["execute_sql", "submit_answer", "commit"]
            ended = await play(first, calls)
            # The second session has an episode of its own: the first one's end does not reach it.
            running = await second.call_tool(calls[0][0], calls[0][1])
            assert not running.is_error and running.structured_content is None
            after = await first.call_tool(calls[0][0], calls[0][1])
            assert after.is_error and "already ended" in text_of(after)
            return ended.structured_content, await play(second, calls[1:]) if len(calls) > 1 else running

    first_end, second_end = run(sessions)
    assert (first_end["reward"], first_end["success"], first_end["task_id"]) == (1.0, True, task_id)
    assert second_end.structured_content["reward"] == 1.0
    records = read_records(RunPaths(out).episodes)
    assert sorted((r.status, r.success, r.seed) for r in records) == [("done", True, 0), ("done", True, 1)]
    assert export_run(out, out.parent / "rows.jsonl").rows == 2


def test_http_wrong_or_missing_token_gets_401(db_http: Any) -> None:
    server = db_http[0]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    for header in ({"Authorization": "Bearer wrong"}, {}):
        request = urllib.request.Request(server.url, data=body, method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **header})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=DEADLINE_S)
        assert refused.value.code == 401
        assert refused.value.headers["WWW-Authenticate"].startswith("Bearer")
        assert "AGENTUNIT_MCP_TOKEN" in refused.value.read().decode()


def test_http_request_without_a_session_is_refused_with_the_fix(db_http: Any) -> None:
    server = db_http[0]

    async def stateless() -> str:
        from mcp.shared.exceptions import MCPError

        async with http_client(server.url, mode="2026-07-28") as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("commit", {})
            return str(refused.value)

    message = run(stateless)
    assert "one episode per MCP session" in message and "mode='legacy'" in message


# ------------------------------------------------------------------------------------------- CLI


def test_cli_refuses_a_public_host_without_a_token(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from agentunit_gym.cli.main import main

    monkeypatch.delenv("AGENTUNIT_MCP_TOKEN", raising=False)
    assert main(["mcp", "--env", "DB-v0", "--transport", "http", "--host", "0.0.0.0"]) == 2
    error = capsys.readouterr().err
    assert "--host 0.0.0.0" in error and "AGENTUNIT_MCP_TOKEN" in error and "127.0.0.1" in error


def test_cli_unknown_task_env_or_backend_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from agentunit_gym.cli.main import main

    assert main(["mcp", "--env", "DB-v0", "--backend", "sqlite", "--task-id", "no-such-task"]) == 2
    assert "no-such-task" in capsys.readouterr().err
    assert main(["mcp", "--env", "DB-v0", "--backend", "embedded"]) == 2
    assert "'embedded' is not one of AgentUnit/DB-v0's: use auto or" in capsys.readouterr().err
    assert main(["mcp", "--env", "Nope-v0"]) == 2
    assert "no registered env 'Nope-v0'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- tools


@pytest.mark.parametrize("env_id", sorted(env_ids()))
def test_every_registered_env_has_valid_mcp_tools(env_id: str) -> None:
    """Every domain's tool table becomes MCP tools with valid JSON schemas, with no MCP code of its own."""
    import jsonschema
    import mcp_types as types
    from gymnasium.envs.registration import load_env_creator

    from agentunit_gym.serve.mcp_server import mcp_tool_fields

    spec = gym.spec(env_id)
    assert isinstance(spec.entry_point, str)
    env_class: Any = load_env_creator(spec.entry_point)
    tools = [types.Tool(**mcp_tool_fields(t)) for t in env_class.tools]
    assert [t.name for t in tools] == [t.name for t in env_class.tools] and any(t.commits for t in env_class.tools)
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object" and tool.description


def test_a_backend_failure_is_an_error_result_without_a_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    """In memory (the SDK's client on the server object): a backend that dies mid-episode gives an
    error result whose structured content has no reward, never a reward of 0."""
    from agentunit_gym.core.env import AgentEnv
    from agentunit_gym.errors import BackendError
    from agentunit_gym.serve.mcp_server import McpEpisodeServer
    from agentunit_gym.serve.served_episodes import EpisodePool, EpisodeSettings

    pool = EpisodePool(EpisodeSettings("DB-v0", backend="sqlite", seed=0))
    server = McpEpisodeServer(pool, transport="stdio")

    def dead(self: AgentEnv[Any], action: str) -> Any:
        raise BackendError("the database connection dropped")

    async def scenario() -> tuple[Any, Any]:
        async with Client(server.server) as client:
            healthy = await client.call_tool("execute_sql", {"query": "SELECT 1"})
            monkeypatch.setattr(AgentEnv, "step", dead)
            return healthy, await client.call_tool("execute_sql", {"query": "SELECT 1"})

    try:
        healthy, failed = run(scenario)
    finally:
        pool.close()
    assert not healthy.is_error and text_of(healthy) == "[(1,)]"
    assert failed.is_error and "connection dropped" in text_of(failed)
    result = failed.structured_content
    assert result["finish_reason"] == "error" and result["reward"] is None and result["success"] is None
    assert "BackendError" in result["error"]
