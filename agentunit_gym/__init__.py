"""agentunit-gym: gymnasium environments for evaluating and training LLM agents on the AgentBench domains.

Importing the package registers every installed domain's env ids with gymnasium: the built-in
``AgentUnit/OS-v0``, ``AgentUnit/DB-v0``, ``AgentUnit/KG-v0`` and ``AgentUnit/WebShop-v0``, any
third-party domain's (entry-point group ``agentunit_gym.domains``), and ``AgentUnit/Remote-v0``
(a session of a served env, registered by ``serve``). :func:`env_ids` lists the domains' ids::

    import gymnasium as gym
    import agentunit_gym

    env = gym.make("AgentUnit/DB-v0", backend="sqlite")
"""

from agentunit_gym.core import FinishReason, Score
from agentunit_gym.core.registry import env_ids
from agentunit_gym.errors import AgentUnitError
from agentunit_gym.serve.registration import register_remote
from agentunit_gym.version import __version__
from agentunit_gym.wrappers.registration import register_envs
from agentunit_gym.wrappers.stack import make_eval_env

register_envs()
register_remote()

__all__ = ["AgentUnitError", "FinishReason", "Score", "__version__", "env_ids", "make_eval_env"]
