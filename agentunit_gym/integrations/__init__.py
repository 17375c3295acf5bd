"""Adapters to the env APIs of RL trainers and to evaluation frameworks: thin modules, optional extras.

- :mod:`agentunit_gym.integrations.skyrl`: every registered AgentUnit env as a SkyRL-Gym
  ``BaseTextEnv``, registered with ``skyrl_gym``'s registry (``pip install
  "agentunit-gym[integrations]"``).
- :mod:`agentunit_gym.integrations.verifiers`: ``load_environment(env_id, split=...)``, a
  verifiers environment whose reward is the env's score.
- :mod:`agentunit_gym.integrations.inspect`: an env's suite as an inspect_ai ``Task`` (the
  ``agentunit`` task), played by inspect's ReAct agent through the env's tools and scored by
  the env (``pip install "agentunit-gym[inspect]"``; docs/agents.md).

Importing this package imports none of them: each adapter imports its library when it is
itself imported, and raises :class:`~agentunit_gym.errors.MissingDependencyError` with the
``pip install`` line when the library is missing. See docs/training.md ("Trainers").
"""

INTEGRATIONS_EXTRA = "integrations"
"""The extra that installs the trainers' env libraries."""

__all__ = ["INTEGRATIONS_EXTRA"]
