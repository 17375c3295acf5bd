"""Adapters to the env APIs of RL trainers: thin modules, one per trainer, optional extras.

- :mod:`agentunit_gym.integrations.skyrl`: every registered AgentUnit env as a SkyRL-Gym
  ``BaseTextEnv``, registered with ``skyrl_gym``'s registry (``pip install
  "agentunit-gym[integrations]"``).
- :mod:`agentunit_gym.integrations.verifiers`: ``load_environment(env_id, split=...)``, a
  verifiers environment whose reward is the env's score.

Importing this package imports neither trainer: each adapter imports its library when it is
itself imported, and raises :class:`~agentunit_gym.errors.MissingDependencyError` with the
``pip install`` line when the library is missing. See docs/training.md ("Trainers").
"""

INTEGRATIONS_EXTRA = "integrations"
"""The extra that installs the trainers' env libraries."""

__all__ = ["INTEGRATIONS_EXTRA"]
