"""The domains, one package each: env, task model, loaders, suite, traps, prompt, metrics.

Each subpackage exports a :class:`~agentunit_gym.core.domain.Domain` as ``DOMAIN`` and is
registered under the entry-point group ``agentunit_gym.domains`` (pyproject.toml), the
same way a third party's domain is. Nothing outside a domain's folder names the domain.
"""
