"""The warm pool: fresh copies, a lease limit, closed on release, refilled ahead."""

from __future__ import annotations

import threading

import pytest

from agentunit_gym.errors import ConfigError, ServerBusyError
from agentunit_gym.serve.pool import EnvPool
from tests.serve.helpers import poll


class FakeEnv:
    made = 0

    def __init__(self) -> None:
        FakeEnv.made += 1
        self.number = FakeEnv.made
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_leases_are_fresh_limited_and_closed_on_release() -> None:
    pool = EnvPool(FakeEnv, limit=2, warm=0)  # type: ignore[arg-type]
    a, b = pool.acquire(), pool.acquire()
    assert a is not b and pool.leased == 2
    with pytest.raises(ServerBusyError, match="2 sessions open, its limit .--max-sessions 2"):
        pool.acquire()
    pool.release(a)
    assert a.closed and pool.leased == 1  # type: ignore[attr-defined]
    c = pool.acquire()
    assert c is not a and not c.closed  # type: ignore[attr-defined]
    pool.close()


def test_the_pool_builds_ahead_and_closes_what_it_holds() -> None:
    pool = EnvPool(FakeEnv, limit=3, warm=2)  # type: ignore[arg-type]
    pool.start()
    poll(lambda: pool.idle == 2, 10, "two warm copies")
    first = pool.acquire()
    poll(lambda: pool.idle == 2, 10, "the pool to refill")
    pool.acquire()
    # Two leased, limit 3: at most one copy is kept warm.
    poll(lambda: pool.idle == 1, 10, "the warm copies to fit the limit")
    assert pool.leased == 2 and not first.closed  # type: ignore[attr-defined]
    idle = list(pool._idle)
    pool.close()
    assert all(env.closed for env in idle)  # type: ignore[attr-defined]
    with pytest.raises(ServerBusyError, match="shutting down"):
        pool.acquire()


def test_a_failed_build_gives_the_lease_back_and_raises() -> None:
    def broken() -> FakeEnv:
        raise ConfigError("no such backend")

    pool = EnvPool(broken, limit=1, warm=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no such backend"):
        pool.acquire()
    assert pool.leased == 0
    with pytest.raises(ConfigError):
        EnvPool(FakeEnv, limit=0)  # type: ignore[arg-type]


def test_concurrent_acquires_never_exceed_the_limit() -> None:
    pool = EnvPool(FakeEnv, limit=5, warm=1)  # type: ignore[arg-type]
    pool.start()
    got: list[object] = []
    refused: list[Exception] = []
    lock = threading.Lock()

    def take() -> None:
        try:
            env = pool.acquire()
            with lock:
                got.append(env)
        except ServerBusyError as exc:
            with lock:
                refused.append(exc)

    threads = [threading.Thread(target=take) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 5 and len(refused) == 15 and len({id(e) for e in got}) == 5
    pool.close()
