"""Transitional: the envs moved to ``agentunit_gym/domains/<name>/``; see :mod:`agentunit_gym.core.registry`."""
