"""One observation per (id, seed, options) on every host: ``gym.make`` without ``backend=`` runs
every registered domain on its embedded backend, whether a Docker daemon answers or not.

A host "with Docker" is simulated at the process seam (``process.docker_client`` answers as a
daemon that pings), a host without it by ``DOCKER_HOST`` pointing at a socket nobody listens
on; the ``docker`` variant compares a real daemon with the dead socket (CI runs it with
``AGENTUNIT_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.backends import process
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.run.runner import env_options
from tests.domains.conformkit import DomainCase

SEEDS = (0, 3)


class _AnsweringDaemon:
    """A Docker client whose daemon answers (``ping``), counting how often the library asked."""

    asked = 0

    def __init__(self, timeout: float = 60.0) -> None:
        type(self).asked += 1

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        pass


def _daemon_answers(monkeypatch: pytest.MonkeyPatch) -> type[_AnsweringDaemon]:
    daemon = type("Daemon", (_AnsweringDaemon,), {"asked": 0})
    monkeypatch.setattr(process, "docker_client", daemon)
    assert process.docker_available() and daemon.asked == 1  # the premise: this host "has Docker"
    daemon.asked = 0
    return daemon


def _no_daemon(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'nobody-listens.sock'}")
    assert not process.docker_available(timeout=2.0)  # the premise: this host has no Docker


def _first_observations(env_id: str) -> list[tuple[str, dict[str, Any]]]:
    env = gym.make(env_id)
    try:
        return [env.reset(seed=seed) for seed in SEEDS]
    finally:
        env.close()


def test_the_same_observation_with_and_without_docker(domain_case: DomainCase, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    for name in ("AGENTUNIT_MYSQL_DSN", "AGENTUNIT_KG_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    embedded = domain_case.domain.embedded_backend.name
    _no_daemon(monkeypatch, tmp_path)
    without = _first_observations(domain_case.env_id)
    daemon = _daemon_answers(monkeypatch)
    with_docker = _first_observations(domain_case.env_id)
    assert daemon.asked == 0  # the default never asks the daemon: nothing about the host decides
    assert [obs for obs, _ in with_docker] == [obs for obs, _ in without]
    assert [info for _, info in with_docker] == [info for _, info in without]
    assert {info["backend"] for _, info in with_docker} == {embedded}


@pytest.mark.docker
def test_a_real_daemon_changes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from agentunit_gym.core import registry

    for name in ("AGENTUNIT_MYSQL_DSN", "AGENTUNIT_KG_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    daemon_kinds = [d for d in registry.domains() if any(b.needs_docker for b in d.backends)]
    assert daemon_kinds
    with_docker = {d.name: _first_observations(d.env_ids[0]) for d in daemon_kinds}
    _no_daemon(monkeypatch, tmp_path)
    for domain in daemon_kinds:
        without = _first_observations(domain.env_ids[0])
        assert with_docker[domain.name] == without, domain.name
        assert {info["backend"] for _, info in without} == {domain.embedded_backend.name}


def test_eval_still_asks_for_auto_and_records_what_it_got(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from agentunit_gym.eval.evaluate import evaluate
    from agentunit_gym.eval.record.records import iter_records

    monkeypatch.delenv("AGENTUNIT_MYSQL_DSN", raising=False)
    config = EvalConfig(envs=("DB-v0",), agent="oracle", n=2)
    assert config.backends == ("auto",) and env_options(config, "AgentUnit/DB-v0")["backend"] == "auto"
    _no_daemon(monkeypatch, tmp_path)
    evaluate(config, tmp_path / "run")
    records = list(iter_records(tmp_path / "run"))
    assert len(records) == 2
    for record, trace in records:
        assert trace is not None and record.backend == trace.backend == "sqlite"


def test_the_hosts_variables_do_not_change_the_default(domain_case: DomainCase,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # A DSN or a SPARQL endpoint in the host's environment names servers for the runs that ask
    # for them (backend="mysql" / "sparql", Freebase tasks); gym.make without backend= ignores them.
    monkeypatch.setenv("AGENTUNIT_MYSQL_DSN", "mysql://root@127.0.0.1:9/unreachable")
    monkeypatch.setenv("AGENTUNIT_KG_ENDPOINT", "http://127.0.0.1:9/sparql")
    env = gym.make(domain_case.env_id)
    try:
        _, info = env.reset(seed=0)
        assert info["backend"] == domain_case.domain.embedded_backend.name
    finally:
        env.close()
