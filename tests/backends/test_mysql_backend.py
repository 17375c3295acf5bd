"""The mysql backend's own behaviour: DSN parsing, the factory's choice, the container it
runs, and typed errors when the server cannot be had. Semantics shared with sqlite are in
the conformance suite; attacks by the agent are in test_sql_safety.py."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Iterator
from urllib.parse import quote as urlquote

import pytest

from agentunit_gym.backends import process
from agentunit_gym.backends.sql import factory
from agentunit_gym.backends.sql.base import Column, TableData
from agentunit_gym.backends.sql.mysql import ConnectParams, MySQLBackend, connect, parse_dsn
from agentunit_gym.backends.sql.mysql.server import ContainerServer
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from agentunit_gym.errors import (
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
    MissingDependencyError,
)
from tests.backends.external_mysql import tcp_mariadb

T = TableData("t", (Column("a"), Column("b")), (("1", "x"), ("2", None)))


@pytest.fixture(scope="module")
def mysql() -> Iterator[MySQLBackend]:
    backend = MySQLBackend()
    yield backend
    backend.close()


def dsn_of(backend: MySQLBackend) -> str:
    """A DSN naming the container's server through its socket, as a user would write it."""
    params = backend.admin_connect_params()
    return (f"mysql://{urlquote(params.user, safe='')}:{urlquote(params.password, safe='')}@localhost/"
            f"?unix_socket={params.unix_socket}")


# -- DSN parsing and error paths that need no server ---------------------------------------


@pytest.mark.parametrize(("dsn", "expected"), [
    ("mysql://root:secret@db.example:3307/", ConnectParams("root", "secret", "db.example", 3307, None)),
    ("mysql://u@127.0.0.1/", ConnectParams("u", "", "127.0.0.1", 3306, None)),
    ("mariadb://a%40b:p%3Aw%2F%40@h/ignored_db", ConnectParams("a@b", "p:w/@", "h", 3306, None)),
    ("mysql://u:p@localhost/?unix_socket=/run/mysqld/mysqld.sock",
     ConnectParams("u", "p", "localhost", 3306, "/run/mysqld/mysqld.sock")),
])
def test_parse_dsn(dsn: str, expected: ConnectParams) -> None:
    assert parse_dsn(dsn) == expected


@pytest.mark.parametrize("dsn", ["postgres://u:p@h/", "mysql://h:3306/", "mysql://u:p@h:notaport/", "h:3306"])
def test_bad_dsn_is_a_config_error(dsn: str) -> None:
    with pytest.raises(ConfigError):
        parse_dsn(dsn)


def test_account_host_depends_on_transport() -> None:
    assert ConnectParams("u", unix_socket="/s").account_host == "localhost"
    assert ConnectParams("u", host="10.0.0.5").account_host == "%"


def test_unreachable_dsn_server_is_unavailable(tmp_path: os.PathLike[str]) -> None:
    missing = os.path.join(os.fspath(tmp_path), "no.sock")
    with pytest.raises(BackendUnavailableError, match="cannot connect"):
        MySQLBackend(dsn=f"mysql://u:p@localhost/?unix_socket={missing}")


def test_no_docker_daemon_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_daemon(timeout: float = 60.0) -> object:
        raise BackendUnavailableError("no Docker daemon answers (test)")

    monkeypatch.setattr(process, "docker_client", no_daemon)
    with pytest.raises(BackendUnavailableError, match="no Docker daemon"):
        MySQLBackend()


def test_missing_pymysql_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymysql", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "agentunit-gym\[mysql\]"'):
        connect(ConnectParams("u", unix_socket="/nonexistent"))


def test_dsn_and_image_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="either dsn"):
        MySQLBackend(dsn="mysql://u:p@h/", image="mysql:8")


# -- the factory ----------------------------------------------------------------------------


def test_factory_rejects_unknown_kinds_and_sqlite_options() -> None:
    with pytest.raises(ConfigError, match="unknown SQL backend"):
        factory.open_sql_backend("postgres")
    with pytest.raises(ConfigError):
        factory.open_sql_backend("sqlite", dsn="mysql://u:p@h/")


def test_factory_auto_falls_back_to_sqlite_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(factory.DSN_ENV, raising=False)
    monkeypatch.setattr(process, "docker_available", lambda timeout=3.0: False)
    with caplog.at_level(logging.INFO, logger="agentunit_gym"):
        backend = factory.open_sql_backend("auto", image="ignored-on-sqlite")
    try:
        assert isinstance(backend, SQLiteBackend) and backend.kind == "sqlite"
        lines = [r.getMessage() for r in caplog.records if r.name == "agentunit_gym"]
        assert len(lines) == 1 and "sqlite" in lines[0]
    finally:
        backend.close()


class _FakeMySQL:
    """Stands in for MySQLBackend to observe what the factory asks for, without a server."""

    kind = "mysql"

    def __init__(self, **kwargs: object) -> None:
        self.kwargs = kwargs


@pytest.mark.parametrize(("kind", "dsn", "env", "options", "expected_dsn"), [
    ("mysql", None, None, {}, None),
    ("mysql", None, "mysql://e:p@envhost/", {}, "mysql://e:p@envhost/"),
    ("mysql", "mysql://a:p@arg/", "mysql://e:p@envhost/", {}, "mysql://a:p@arg/"),
    ("mysql", None, "mysql://e:p@envhost/", {"image": "mysql:8"}, None),
    ("auto", None, "mysql://e:p@envhost/", {"start_timeout": 5.0}, "mysql://e:p@envhost/"),
])
def test_factory_routes_dsn_and_options(monkeypatch: pytest.MonkeyPatch, kind: str, dsn: str | None,
                                        env: str | None, options: dict[str, object],
                                        expected_dsn: str | None) -> None:
    import agentunit_gym.backends.sql.mysql as mysql_module

    monkeypatch.setattr(mysql_module, "MySQLBackend", _FakeMySQL)
    monkeypatch.setattr(process, "docker_available", lambda timeout=3.0: False)
    if env is None:
        monkeypatch.delenv(factory.DSN_ENV, raising=False)
    else:
        monkeypatch.setenv(factory.DSN_ENV, env)
    backend = factory.open_sql_backend(kind, dsn=dsn, **options)
    assert isinstance(backend, _FakeMySQL)
    assert backend.kwargs == {"dsn": expected_dsn, **options}


@pytest.mark.docker
def test_factory_auto_picks_the_container_when_docker_answers(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv(factory.DSN_ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="agentunit_gym"):
        backend = factory.open_sql_backend()
    try:
        assert isinstance(backend, MySQLBackend) and backend.container_name is not None
        lines = [r.getMessage() for r in caplog.records if r.name == "agentunit_gym"]
        assert len(lines) == 1 and "container" in lines[0]
    finally:
        backend.close()


@pytest.mark.docker
def test_factory_uses_the_dsn_from_the_environment(mysql: MySQLBackend, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(factory.DSN_ENV, dsn_of(mysql))
    with caplog.at_level(logging.INFO, logger="agentunit_gym"):
        backend = factory.open_sql_backend("auto")
    try:
        assert isinstance(backend, MySQLBackend) and backend.container_name is None
        assert "AGENTUNIT_MYSQL_DSN" in caplog.records[-1].getMessage()
        db = backend.open_episode([T])
        # The episode lives on the container's server, reached through the DSN.
        assert db.execute("SELECT COUNT(*) FROM t").rows == ((2,),)
        with connect(mysql.admin_connect_params()) as conn, conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            assert (db.name,) in cur.fetchall()
        db.close()
    finally:
        backend.close()
    # Closing a DSN backend leaves the server running.
    check = mysql.open_episode([T])
    check.close()


@pytest.mark.docker
def test_dsn_over_tcp_uses_any_host_accounts_and_cleans_up() -> None:
    """A DSN server reached over TCP: episode accounts are 'user'@'%' (a '%' that must not be
    mistaken for a query placeholder), and closing leaves no database or account behind."""
    with tcp_mariadb() as (dsn, container):
        backend = MySQLBackend(dsn=dsn)
        try:
            db = backend.open_episode([T])
            assert db.execute("SELECT CURRENT_USER()").rows[0][0].endswith("@%")
            assert db.execute("SELECT a FROM t WHERE b IS NULL").rows == (("2",),)
            assert db.table_hash("t", ["a", "b"]) == _md5_table([("1", "x"), ("2", None)])
            db.close()
        finally:
            backend.close()
        listing = container.exec_run(["mariadb", "-uroot", "-N", "-e",
                                      "SELECT user FROM mysql.user; SHOW DATABASES;"]).output.decode()
        assert "au_" not in listing and "agentunit_ep_" not in listing


def _md5_table(rows: list[tuple[str | None, ...]]) -> str:
    digests = sorted(hashlib.md5(",".join(c for c in r if c is not None).encode()).hexdigest()[:5] for r in rows)
    return hashlib.md5(",".join(digests).encode()).hexdigest()


@pytest.mark.docker
def test_wrong_dsn_password_is_unavailable(mysql: MySQLBackend) -> None:
    params = mysql.admin_connect_params()
    with pytest.raises(BackendUnavailableError, match="Access denied"):
        MySQLBackend(dsn=f"mysql://{params.user}:wrong@localhost/?unix_socket={params.unix_socket}")


# -- the container ----------------------------------------------------------------------------


@pytest.mark.docker
def test_container_is_isolated_labelled_and_on_tmpfs(mysql: MySQLBackend) -> None:
    container = process.docker_client().containers.get(mysql.container_name)
    host = container.attrs["HostConfig"]
    assert container.labels.get("agentunit_gym") == "1"
    assert host["NetworkMode"] == "none"
    assert host["Init"] is True
    assert "/var/lib/mysql" in host["Tmpfs"]
    assert container.image.tags[0].startswith("agentunit-gym/mariadb:")
    assert mysql.flavor == "mariadb" and "MariaDB" in mysql.server_version


@pytest.mark.docker
def test_episode_user_connects_without_ssl_and_admin_defaults_to_the_episode(mysql: MySQLBackend) -> None:
    db = mysql.open_episode([T])
    try:
        assert db.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'").rows == (("Ssl_cipher", ""),)
        assert db.execute("SELECT DATABASE()").rows == ((db.name,),)
        assert db.admin_query("SELECT DATABASE()").rows == ((db.name,),)
        assert db.execute("SELECT CURRENT_USER()").rows[0][0].startswith("au_")
    finally:
        db.close()


@pytest.mark.docker
def test_tables_the_server_rejects_are_config_errors_and_leave_nothing(mysql: MySQLBackend) -> None:
    def server_state() -> tuple[set[str], set[str]]:
        mysql.settle()  # ended episodes dropped, spares made; the spares themselves left out
        spare_dbs, spare_users = mysql.spare_names()
        with connect(mysql.admin_connect_params()) as conn, conn.cursor() as cur:
            cur.execute("SELECT user FROM mysql.user")
            users = {row[0] for row in cur.fetchall()} - set(spare_users)
            cur.execute("SHOW DATABASES")
            return {row[0] for row in cur.fetchall()} - set(spare_dbs), users

    before = server_state()
    with pytest.raises(ConfigError, match="rejected"):
        mysql.open_episode([TableData("t", (Column("a", "NOSUCHTYPE"),))])
    with pytest.raises(ConfigError, match="rejected"):
        mysql.open_episode([TableData("t", (Column("a", "INT"),), (("not a number",),))], database="named_bad")
    assert server_state() == before
    assert mysql.open_episodes == 0


@pytest.fixture()
def started_servers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the SQL server containers the test starts, recorded as each is started.
    The leftover checks look at these only: on a shared daemon (other tests' servers, a killed
    one in test_sql_safety.py, another pytest-xdist worker's) others come and go meanwhile."""
    names: list[str] = []
    wait_ready = ContainerServer._wait_ready

    def recording(self: ContainerServer, params: ConnectParams, tag: str) -> None:
        assert self.name is not None
        names.append(self.name)
        wait_ready(self, params, tag)

    monkeypatch.setattr(ContainerServer, "_wait_ready", recording)
    return names


@pytest.mark.docker
def test_container_that_exits_while_starting_is_unavailable_with_its_logs(started_servers: list[str]) -> None:
    # The base image has no server: the "server" exits at once.
    with pytest.raises(BackendUnavailableError, match="stopped while starting"):
        MySQLBackend(image="agentunit-gym/base:bookworm", start_timeout=20.0)
    assert len(started_servers) == 1 and not _containers_named(started_servers)


@pytest.mark.docker
def test_server_not_ready_in_time_is_a_timeout_and_is_removed(started_servers: list[str]) -> None:
    with pytest.raises(BackendTimeoutError, match="not ready within"):
        MySQLBackend(start_timeout=0.0)
    assert len(started_servers) == 1 and not _containers_named(started_servers)


@pytest.mark.docker
def test_missing_image_is_unavailable_with_the_pull_command() -> None:
    with pytest.raises(BackendUnavailableError, match="docker pull"):
        MySQLBackend(image="agentunit-gym/no-such-image:0")


@pytest.mark.docker
def test_closing_the_backend_drops_open_episodes_and_removes_the_container() -> None:
    backend = MySQLBackend()
    first, second = backend.open_episode([T]), backend.open_episode([T])
    name = backend.container_name
    backend.close()
    assert first.closed and second.closed and backend.open_episodes == 0
    assert not process.docker_client().containers.list(all=True, filters={"name": name})


def _containers_named(names: list[str]) -> list[object]:
    """The containers, in any state, of these names (a failed start must remove its container)."""
    client = process.docker_client()
    return [c for name in names for c in client.containers.list(all=True, filters={"name": name})]
