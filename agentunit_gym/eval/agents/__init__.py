"""Agents, the lowest stage of the evaluator: what the engine drives, and how a model is reached.

- :mod:`~agentunit_gym.eval.agents.builtin`: the :class:`Agent` protocol (``act(observation,
  info) -> str``), the oracle and random agents, a function as an agent, ``--agent`` resolution.
- :mod:`~agentunit_gym.eval.agents.info`: the keys the evaluator adds to ``info`` (seed,
  reference actions) and reads back.
- :mod:`~agentunit_gym.eval.agents.openai_agent`: the OpenAI-compatible chat agent, over the
  one model client (:mod:`~agentunit_gym.eval.agents.model_client` with its settings, errors,
  rate gate and retry policy), which the judge uses too.
- :mod:`~agentunit_gym.eval.agents.fake_server` and :mod:`~agentunit_gym.eval.agents.recording_proxy`:
  a scriptable chat server and a recording proxy (tests, benchmarks, debugging).

Nothing here imports another stage of the evaluator.
"""

from agentunit_gym.eval.agents.builtin import (
    REFERENCE_KEY,
    Agent,
    AgentFactory,
    OracleAgent,
    RandomAgent,
    act_async,
    act_blocking,
    import_agent,
    needs_reference,
    reset_agent,
    reset_agent_async,
    resolve_agent,
)

__all__ = ["REFERENCE_KEY", "Agent", "AgentFactory", "OracleAgent", "RandomAgent", "act_async", "act_blocking",
           "import_agent", "needs_reference", "reset_agent", "reset_agent_async", "resolve_agent"]
