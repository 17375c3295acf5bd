"""The owned-backend lifecycle (core/backend_handle.py), alone and in an env."""

from __future__ import annotations

import copy
import pickle
from itertools import count
from operator import methodcaller

import pytest

from agentunit_gym.core.backend_handle import BackendHandle
from agentunit_gym.errors import ConfigError, EpisodeStateError

from .toy import ToyBackend, ToyEnv

_serial = count()


class Numbered(ToyBackend):
    """A backend that knows which opening it is (module level: a handle's reopen pickles)."""

    def __init__(self) -> None:
        super().__init__()
        self.number = next(_serial)


def _owned() -> tuple[Numbered, BackendHandle[Numbered]]:
    backend = Numbered()
    return backend, BackendHandle.owned(backend, reopen=Numbered, warm=methodcaller("start"))


def test_a_pickled_owned_handle_reopens_its_own_backend_on_first_use() -> None:
    original, handle = _owned()
    travelled = pickle.loads(pickle.dumps(handle))
    assert (travelled.is_open, travelled.kind, travelled.owns) == (False, "toy", True)
    reopened = travelled.get()
    assert reopened is not original and reopened.number > original.number and travelled.is_open
    assert travelled.get() is reopened  # once
    travelled.close()
    assert reopened.closed == 1 and original.closed == 0 and handle.get() is original  # each closes its own


def test_close_closes_only_an_owned_backend_and_once() -> None:
    original, handle = _owned()
    handle.close()
    handle.close()
    assert original.closed == 1 and not handle.is_open
    with pytest.raises(EpisodeStateError, match="closed"):
        handle.get()  # a closed handle never reopens
    given = ToyBackend()
    borrowed = BackendHandle.borrowed(given, refusal="it was given")
    assert borrowed.get() is given and not borrowed.owns
    borrowed.close()
    assert given.closed == 0 and not borrowed.is_open


def test_a_borrowed_backend_refuses_to_travel_with_the_reason() -> None:
    borrowed = BackendHandle.borrowed(ToyBackend(), refusal="it runs on a toy it was given (toy=...)")
    for travel in (pickle.dumps, copy.deepcopy, lambda h: h.travelling()):
        with pytest.raises(ConfigError, match=r"cannot be pickled or copied: it runs on a toy it was given \(toy"):
            travel(borrowed)


def test_warm_starts_a_pristine_backend_only() -> None:
    original, handle = _owned()
    handle.warm()
    handle.warm()
    assert original.started == 2 and handle.pristine  # idempotent for the caller: start is the backend's
    handle.pristine = False  # the env ran an episode on it
    handle.warm()
    assert original.started == 2
    travelled = handle.travelling()
    travelled.warm()  # a copy opens a fresh one: pristine again, started
    assert travelled.pristine and travelled.live is not None and travelled.live.started == 1
    given = ToyBackend()
    BackendHandle.borrowed(given, refusal="given").warm()
    assert given.started == 0  # the caller's backend is the caller's to start


def test_an_env_copies_reopen_their_own_backends_and_close_only_theirs() -> None:
    env = ToyEnv()
    env.reset(options={"task_id": "t1"})
    for copied in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env), copy.copy(env)):
        assert copied.backend is not env.backend and not copied.backend.is_open
        copied.warm_up()
        assert copied.backend.live is not None and copied.backend.live is not env.toy_backend
        assert copied.backend.live.started == 1
        copied.close()
    assert env.toy_backend.closed == 0 and env.backend.get() is env.toy_backend
    env.close()
    assert env.closed_backend == 1


def test_an_env_around_a_borrowed_backend_cannot_be_pickled_or_copied() -> None:
    env = ToyEnv()
    given = ToyBackend()
    env.backend = BackendHandle.borrowed(given, refusal="it plays on a toy it was given")
    for travel in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(ConfigError, match="it plays on a toy it was given"):
            travel(env)
    env.close()
    assert given.closed == 0
