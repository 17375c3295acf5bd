"""``eval --env-option [ENV:]KEY=VALUE``: env keyword arguments given on the command line.

A value is read as JSON when it parses (``15``, ``true``, ``{"a": 1}``, ``"text"``) and as
the text itself otherwise (``http://127.0.0.1:7878/query``). ``KEY=VALUE`` goes to every env
of the run whose constructor names ``KEY`` (``endpoint`` reaches the KG env only);
``ENV:KEY=VALUE`` goes to that env alone, also for options an env passes on to its backend
(``**backend_options``, checked against the options the domain's backends declare:
:attr:`~agentunit_gym.core.domain.BackendSpec.options_from`). The result, one mapping per env
id, is stored in ``config.json`` (``EvalConfig.env_options_by_env``), so ``--resume`` uses it
and checks it.

Example::

    >>> parse_env_option("KG-v0:endpoint=http://127.0.0.1:7878/query")
    ('KG-v0', 'endpoint', 'http://127.0.0.1:7878/query')
    >>> parse_env_option("max_results=500")
    (None, 'max_results', 500)
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from agentunit_gym.core.domain import import_object
from agentunit_gym.errors import ConfigError

_FORM = "[ENV:]KEY=VALUE, e.g. max_steps=12, or ENV:url=http://127.0.0.1:3000 for the env ENV alone"


def parse_env_option(text: str) -> tuple[str | None, str, Any]:
    """``(env or None, key, value)`` of one ``--env-option``; the value JSON-parsed when it parses.

    Raises:
        ConfigError: no ``=``, or an empty or non-identifier key.
    """
    left, sep, raw = text.partition("=")
    env: str | None = None
    if ":" in left:
        env, _, left = left.rpartition(":")
    key = left.strip()
    if not sep or not key.isidentifier() or (env is not None and not env.strip()):
        raise ConfigError(f"--env-option {text!r}: expected {_FORM}; write it in that form.")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return (env.strip() if env is not None else None), key, value


def _parameters(env_id: str) -> tuple[set[str], bool]:
    """The keyword names ``env_id``'s constructor takes, and whether it takes ``**kwargs`` too."""
    try:
        cls = import_object(str(gym.spec(env_id).entry_point))
    except gym.error.Error as exc:
        raise ConfigError(f"--env-option: no env {env_id!r} is registered ({exc}).") from None
    params = inspect.signature(cls.__init__).parameters.values()
    names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"}
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def _backend_options(env_id: str, backends: Sequence[str]) -> dict[str, frozenset[str]] | None:
    """The options each backend ``env_id`` may run on takes through the env's ``**options``, by
    backend name: the run's backend for its domain, or every backend of the domain under ``auto``.
    None when one of them does not declare its options (a third party's), so none are checked."""
    from agentunit_gym.core import registry
    from agentunit_gym.eval.plan.routing import backend_for

    domain = registry.domain_of_env(env_id)
    if domain is None:
        return None
    kind = backend_for(env_id, backends)
    found = {}
    for spec in domain.backends if kind == "auto" else (domain.backend(kind),):
        names = spec.option_names()
        if names is None:
            return None
        found[spec.name] = names
    return found


def _check_qualified(text: str, env_id: str, key: str, names: set[str], open_ended: bool,
                     backends: Sequence[str]) -> None:
    """Refuse ``ENV:KEY`` when neither the env nor a backend it may run on takes ``KEY``."""
    if key in names:
        return
    by_backend = _backend_options(env_id, backends) if open_ended else {}
    if by_backend is None or any(key in options for options in by_backend.values()):
        return
    listing = "".join(f"; the {name} backend's: {', '.join(sorted(options - names)) or 'none'}"
                      for name, options in by_backend.items())
    raise ConfigError(f"--env-option {text!r}: {env_id} takes no option {key!r}; its options: "
                      f"{', '.join(sorted(names))}{listing}.")


def resolve_env_options(texts: Sequence[str], env_ids: Sequence[str],
                        backends: Sequence[str] = ("auto",)) -> dict[str, dict[str, Any]]:
    """The options of each env of the run (full ids), from ``--env-option`` texts in order (a later one wins).

    ``ENV:KEY`` is checked against the env's own keywords and, for an env that passes the rest
    on to its backend, against the options of the backend it runs on (every backend of its
    domain under ``auto``).

    Args:
        texts: the ``--env-option`` values.
        env_ids: the run's envs (full ids).
        backends: the run's ``--backend`` names (``auto`` for a domain none of them belongs to).

    Raises:
        ConfigError: a malformed option; an ``ENV:`` that is not in the run; an option no env
            of the run takes (the message lists what each takes); an ``ENV:KEY`` that neither
            that env nor its backend takes.
    """
    from agentunit_gym.eval.plan.routing import full_env_id

    out: dict[str, dict[str, Any]] = {}
    signatures = {env_id: _parameters(env_id) for env_id in env_ids}
    for text in texts:
        env, key, value = parse_env_option(text)
        if env is not None:
            target = full_env_id(env)
            if target not in signatures:
                raise ConfigError(f"--env-option {text!r}: {env} is not an env of this run "
                                  f"({', '.join(signatures)}); name one of them, or add it with --env.")
            _check_qualified(text, target, key, *signatures[target], backends)
            out.setdefault(target, {})[key] = value
            continue
        takers = [env_id for env_id, (names, _) in signatures.items() if key in names]
        if not takers:
            listing = "; ".join(f"{e}: {', '.join(sorted(n))}" for e, (n, _) in signatures.items())
            raise ConfigError(f"--env-option {text!r}: no env of this run names an option {key!r} ({listing}). "
                              "For an option an env passes to its backend, name the env: ENV:KEY=VALUE.")
        for env_id in takers:
            out.setdefault(env_id, {})[key] = value
    return out


__all__ = ["parse_env_option", "resolve_env_options"]
