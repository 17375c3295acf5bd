"""Built-in agents, agent resolution, and the OpenAI-compatible agent over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import AgentContextLimitError, ConfigError
from agentunit_gym.eval.agents.builtin import REFERENCE_KEY, OracleAgent, RandomAgent, resolve_agent
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.openai_agent import (
    ModelAPIError,
    OpenAIChatAgent,
    OpenAIConfig,
    context_limit_message,
    load_price_table,
)
from tests.core.toy import ToyEnv


class EchoClassAgent:
    """Used by the module:attr test."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return "Act: answer(42)"


def plain_function_agent(observation: str, info: dict[str, Any]) -> str:
    return "Act: answer(7)"


def test_oracle_replays_the_reference_and_requires_it() -> None:
    agent = OracleAgent()
    agent.reset({REFERENCE_KEY: ["a", "b"]})
    assert [agent.act("", {}) for _ in range(3)] == ["a", "b", "b"]
    with pytest.raises(ConfigError, match="reference_actions"):
        agent.reset({})


def test_random_agent_is_well_formed_and_seeded() -> None:
    env = ToyEnv()
    obs, info = env.reset(options={"task_id": "t1"})
    info["seed"] = 5
    replies = []
    for _ in range(2):
        agent = RandomAgent()
        agent.reset(info)
        replies.append([agent.act(obs, info) for _ in range(6)])
    assert replies[0] == replies[1]  # same seed, same replies
    for reply in replies[0]:
        call = json.loads(reply)
        assert call["name"] in ("echo", "answer")
        assert env.parse_action(reply).__class__.__name__ == "Action"  # every reply parses as a valid call
    assert len(set(replies[0])) > 1


def test_resolve_agent_module_attr() -> None:
    label, factory = resolve_agent("tests.eval.test_agents:EchoClassAgent")
    a, b = factory(), factory()
    assert a is not b and a.act("", {}) == "Act: answer(42)"
    _, fn_factory = resolve_agent("tests.eval.test_agents:plain_function_agent")
    assert fn_factory().act("", {}) == "Act: answer(7)"
    with pytest.raises(ConfigError, match="cannot import"):
        resolve_agent("no_such_module_xyz:Agent")
    with pytest.raises(ConfigError, match="no attribute"):
        resolve_agent("tests.eval.test_agents:Missing")
    with pytest.raises(ConfigError, match="unknown agent"):
        resolve_agent("gpt4")


def test_openai_needs_a_key_for_remote_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AU_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="AU_TEST_KEY"):
        resolve_agent("openai:gpt-4o", api_key_env="AU_TEST_KEY")
    monkeypatch.setenv("AU_TEST_KEY", "sk-test")
    label, _ = resolve_agent("openai:gpt-4o", api_key_env="AU_TEST_KEY")
    assert label == "openai:gpt-4o"


def test_react_agent_sends_prompt_example_and_reports_usage_and_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AU_KEY", "sk-abc")
    with FakeChatServer(lambda body: {"role": "assistant", "content": "Think: ok\nAct: answer(42)"}) as server:
        config = OpenAIConfig(model="m1", base_url=server.base_url, api_key_env="AU_KEY",
                              prices={"m1": (1.0, 2.0)})
        agent = OpenAIChatAgent(config)
        agent.reset({"domain": "os", "grammar": "Act: bash ...", "tools": []})
        reply = asyncio.run(agent.act("Task: say 42", {}))
        assert isinstance(reply, AgentReply) and str(reply).endswith("Act: answer(42)")
        body = server.requests[0]
        assert body["model"] == "m1"
        roles = [m["role"] for m in body["messages"]]
        # system, the worked example (2 user/assistant pairs), then the task.
        assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
        # The grammar is said once, by the env's first observation; the system message has none.
        assert "Act: bash ..." not in body["messages"][0]["content"]
        assert body["messages"][-1]["content"] == "Task: say 42"
        usage = reply.usage
        assert usage is not None and usage.tokens_in is not None and usage.tokens_out is not None
        assert usage.cost == pytest.approx((usage.tokens_in * 1.0 + usage.tokens_out * 2.0) / 1e6)
        assert usage.latency_s is not None and usage.latency_s > 0
        asyncio.run(agent.act("The output of the OS:\nhi", {}))
        assert server.requests[1]["messages"][-2]["role"] == "assistant"  # the history is kept


def test_tools_mode_turns_tool_calls_into_json_calls() -> None:
    calls = iter([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{\"text\": \"hi\"}"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "answer", "arguments": "{\"text\": \"42\"}"}}]}])
    with FakeChatServer(lambda body: next(calls)) as server:
        env = ToyEnv()
        obs, info = env.reset(options={"task_id": "t1"})
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, mode="tools"))
        agent.reset(info)
        first = asyncio.run(agent.act(obs, info))
        assert json.loads(first) == {"name": "echo", "arguments": {"text": "hi"}}
        obs, *_ = env.step(first)
        second = asyncio.run(agent.act(obs, info))
        _, reward, terminated, _, _ = env.step(second)
        assert terminated and reward == 1.0
        assert server.requests[0]["tools"] == info["tools"]
        # The observation goes back as the tool's result, tied to the call id.
        assert server.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "hi"}
        # The call goes back with an empty content, not null (llama-cpp-python's server refuses null
        # and a missing content with a 500); the conversation itself keeps OpenAI's shape.
        assert server.requests[1]["messages"][-2] == {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{\"text\": \"hi\"}"}}]}
        assert agent.messages[-3]["content"] is None


def test_retries_429_and_5xx_then_succeeds() -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, failures=[429, 503, 500]) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01))
        agent.reset({})
        assert str(asyncio.run(agent.act("hi", {}))) == "ok"
        assert server.statuses == [429, 503, 500, 200]


def test_gives_up_after_max_retries_and_never_retries_401() -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, failures=[500] * 10) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01, max_retries=2))
        agent.reset({})
        with pytest.raises(ModelAPIError, match="3 attempts"):
            asyncio.run(agent.act("hi", {}))
        assert len(server.statuses) == 3
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, failures=[401]) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01))
        agent.reset({})
        with pytest.raises(ModelAPIError, match="401") as err:
            asyncio.run(agent.act("hi", {}))
        assert err.value.status == 401 and server.statuses == [401]


@pytest.mark.parametrize(("status", "body", "words"), [
    # OpenAI: the code says it.
    (400, {"error": {"message": "Your input exceeds the context window of this model. Please adjust your input "
                                "and try again.", "type": "invalid_request_error", "param": "input",
                     "code": "context_length_exceeded"}}, "exceeds the context window"),
    # vLLM (older): a top-level error object whose code is the status; only the message says it.
    (400, {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you "
           "requested 4600 tokens (4088 in the messages, 512 in the completion). Please reduce the length of the "
           "messages or completion.", "type": "BadRequestError", "param": None, "code": 400},
     "maximum context length is 4096"),
    # vLLM (newer): the prompt alone is too long.
    (400, {"error": {"message": "Input prompt (5000 tokens) is too long and exceeds limit of 4096",
                     "type": "BadRequestError", "param": None, "code": 400}}, "is too long"),
    # llama.cpp's server: its error type says it.
    (400, {"error": {"code": 400, "message": "request (4476 tokens) exceeds the available context size (4096 "
                     "tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 4476,
                     "n_ctx": 4096}}, "available context size"),
    # A 413 with a plain-text body.
    (413, "prompt is too long: 210000 tokens > 200000 maximum", "210000 tokens"),
])
def test_context_overflow_refusals_are_recognised(status: int, body: Any, words: str) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    message = context_limit_message(status, text)
    assert message is not None and words in message


@pytest.mark.parametrize(("status", "body"), [
    (400, {"error": {"message": "Invalid value for 'temperature': must be at most 2.", "type": "invalid_request_error",
                     "param": "temperature", "code": "invalid_value"}}),
    (400, {"object": "error", "message": "The model `nope` does not exist.", "type": "NotFoundError", "code": 400}),
    (413, "<html><body><h1>413 Request Entity Too Large</h1></body></html>"),
    # The right words under a status that is not a refusal of the request's size.
    (401, {"error": {"message": "maximum context length", "code": "context_length_exceeded"}}),
])
def test_other_refusals_are_not_context_overflows(status: int, body: Any) -> None:
    assert context_limit_message(status, body if isinstance(body, str) else json.dumps(body)) is None


def test_context_overflow_raises_a_typed_error_and_is_never_retried() -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, context_limit_after=1) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01))
        agent.reset({})
        assert str(asyncio.run(agent.act("hi", {}))) == "ok"
        with pytest.raises(AgentContextLimitError, match="'m'.*context window.*maximum context length") as err:
            asyncio.run(agent.act("again", {}))
        assert err.value.model == "m" and err.value.status == 400
        assert server.statuses == [200, 400]
    # A 400 that says something else stays an ordinary failure of the endpoint.
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, failures=[400]) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01))
        agent.reset({})
        with pytest.raises(ModelAPIError, match="400") as api_err:
            asyncio.run(agent.act("hi", {}))
        assert api_err.value.status == 400 and server.statuses == [400]


def test_turn_deadline_bounds_a_slow_server() -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, latency_s=1.0) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, request_timeout_s=0.2,
                                             turn_deadline_s=0.6, backoff_s=0.01))
        agent.reset({})
        with pytest.raises(ModelAPIError, match="within 0.6 s"):  # the turn's deadline ended it
            asyncio.run(agent.act("hi", {}))
        # Each attempt lasts its 0.2 s timeout at least: the 0.6 s deadline allows four at most.
        assert 1 <= len(server.arrivals) <= 4


def test_price_table_file(tmp_path: Any) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"mine": [0.5, 1.5]}))
    assert load_price_table(path) == {"mine": (0.5, 1.5)}
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="price table"):
        load_price_table(path)


def test_one_sdk_client_sends_the_key_only_when_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentunit_gym.eval.agents.model_client import ModelClient

    monkeypatch.delenv("AU_NO_KEY", raising=False)
    monkeypatch.setenv("AU_KEY", "sk-abc")
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, failures=[503]) as server:
        keyless = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, api_key_env="AU_NO_KEY",
                                           backoff_s=0.01))
        keyed = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, api_key_env="AU_KEY"))
        # The synchronous client keeps the same policy: the 503 is retried.
        assert keyless.complete_sync([{"role": "user", "content": "hi"}]).text == "ok"
        assert asyncio.run(keyed.complete([{"role": "user", "content": "hi"}])).text == "ok"
        assert server.statuses == [503, 200, 200]
        assert "authorization" not in server.headers[1]
        assert server.headers[2]["authorization"] == "Bearer sk-abc"


def test_a_missing_sdk_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from agentunit_gym.eval.agents import model_client

    monkeypatch.setitem(sys.modules, "openai", None)  # import openai -> ImportError
    monkeypatch.setattr(model_client, "_WARM", __import__("threading").Event())
    with pytest.raises(ConfigError, match=r'pip install "agentunit-gym\[openai\]"'):
        model_client.ModelClient(OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1"))
