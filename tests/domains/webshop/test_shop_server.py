"""The shop server: the same pages over HTTP as in process, in a thread and in its container."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentunit_gym.backends.shop.base import ShopBackend
from agentunit_gym.backends.shop.catalog import GeneratedCatalog
from agentunit_gym.backends.shop.client import ServerShopBackend, ShopClient
from agentunit_gym.backends.shop.engine import EmbeddedShopBackend, Shop
from agentunit_gym.backends.shop.server import ShopServer, ShopService
from agentunit_gym.domains.webshop.env import WebShopEnv
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.errors import BackendError, BackendUnavailableError, ConfigError
from tests.domains.webshop import shop_conformance as conformance
from tests.domains.webshop.conftest import SMALL_SEED, SMALL_SIZE


@pytest.fixture(scope="module")
def tcp_server(small_shop: Shop, small_goals: list[WebShopTask]) -> Iterator[ShopServer]:
    with ShopServer(ShopService(small_shop, {g.id: g.goal() for g in small_goals})) as server:
        yield server


@pytest.fixture(scope="module")
def unix_server(small_shop: Shop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShopServer]:
    sock = tmp_path_factory.mktemp("shop") / "shop.sock"
    with ShopServer(ShopService(small_shop), unix=str(sock)) as server:
        yield server


@pytest.fixture(params=["tcp", "unix"])
def server_backend(request: pytest.FixtureRequest, tcp_server: ShopServer, unix_server: ShopServer) -> ShopBackend:
    server = tcp_server if request.param == "tcp" else unix_server
    return ServerShopBackend(server.url)


def test_conformance_over_http(server_backend: ShopBackend, small_goals: list[WebShopTask],
                               small_catalog: GeneratedCatalog) -> None:
    conformance.check_search_page(server_backend, small_goals[0])
    conformance.check_results_paging(server_backend, small_goals[0], small_catalog)
    conformance.check_item_and_sub_pages(server_backend, next(t for t in small_goals if t.goal_options),
                                         small_catalog)
    conformance.check_search_from_any_page(server_backend, next(t for t in small_goals if t.goal_options),
                                           small_catalog)
    for task in small_goals[:5]:
        conformance.check_reference_purchase(server_backend, task)


def test_observations_identical_to_embedded(server_backend: ShopBackend, shop_backend: EmbeddedShopBackend,
                                            small_goals: list[WebShopTask]) -> None:
    for task in small_goals[:4]:
        assert conformance.transcript(server_backend, task) == conformance.transcript(shop_backend, task)


def test_env_over_the_server_matches_the_embedded_env(tcp_server: ShopServer, shop_backend: EmbeddedShopBackend,
                                                      small_goals: list[WebShopTask]) -> None:
    outputs = []
    for backend in (ServerShopBackend(tcp_server.url), shop_backend):
        with WebShopEnv(tasks=small_goals, shop_backend=backend) as env:
            run = []
            for task in small_goals[:3]:
                run.append(env.reset(options={"task_id": task.id})[0])
                for step in task.reference_solution:
                    obs, reward, *_ = env.step(env.render_action(step))
                    run.append((obs, reward))
            outputs.append(run)
    assert outputs[0] == outputs[1]


def test_sessions_are_forgotten_on_close(tcp_server: ShopServer, small_goals: list[WebShopTask]) -> None:
    backend = ServerShopBackend(tcp_server.url)
    before = tcp_server.service.session_count
    session = backend.open_session(small_goals[0].goal())
    assert tcp_server.service.session_count == before + 1
    session.close()
    session.close()
    assert tcp_server.service.session_count == before


def test_bad_requests_get_clear_errors(tcp_server: ShopServer) -> None:
    client = ShopClient(tcp_server.url, timeout=5)
    status, body = client.request("POST", "/api/sessions", {"goal": {"asin": "x"}})
    assert status == 400 and "goal" in body["error"]
    status, body = client.request("POST", "/api/sessions/nope/click", {"value": "x"})
    assert status == 404
    with pytest.raises(BackendError, match="HTTP 404"):
        client.expect("GET", "/api/sessions/nope")
    with pytest.raises(ConfigError):
        ShopClient("ftp://example")
    with pytest.raises(BackendUnavailableError):
        ServerShopBackend("http://127.0.0.1:9", timeout=2)


def test_html_pages_for_people(tcp_server: ShopServer, small_goals: list[WebShopTask]) -> None:
    task = small_goals[0]
    opener = urllib.request.build_opener()
    page = opener.open(f"{tcp_server.url}/play/{task.id}", timeout=10)
    url = page.geturl()
    assert "/session/" in url
    html = page.read().decode()
    assert "id='search_input'" in html and task.instruction in html
    for step in task.reference_solution:
        verb = "search?keywords=" if step.tool == "search" else "click?value="
        html = opener.open(f"{url}/{verb}{urllib.parse.quote(str(step.arguments))}", timeout=10).read().decode()
    assert "Thank you for shopping with us!" in html and "id='reward'>1.0<" in html
    health = json.loads(opener.open(f"{tcp_server.url}/api/health", timeout=10).read())
    assert health["products"] == SMALL_SIZE


@pytest.mark.docker
def test_conformance_in_the_container(small_goals: list[WebShopTask], small_catalog: GeneratedCatalog,
                                      shop_backend: EmbeddedShopBackend) -> None:
    backend = ServerShopBackend.start_container(catalog_size=SMALL_SIZE, catalog_seed=SMALL_SEED)
    container = backend.container
    try:
        attrs = container.attrs["HostConfig"]
        assert attrs["NetworkMode"] == "none" and attrs["ReadonlyRootfs"] is True
        assert backend.product_count() == SMALL_SIZE and backend.catalog_key == small_catalog.key
        conformance.check_results_paging(backend, small_goals[0], small_catalog)
        for task in small_goals[:3]:
            conformance.check_reference_purchase(backend, task)
            assert conformance.transcript(backend, task) == conformance.transcript(shop_backend, task)
    finally:
        backend.close()
    container_gone = not [c for c in container.client.containers.list(all=True) if c.id == container.id]
    assert container_gone and not Path(backend.client.url.removeprefix("unix://")).exists()
    backend.close()  # idempotent


def test_env_server_backend_refuses_webshop_files_without_url(tmp_path: Path) -> None:
    from agentunit_gym.backends.shop.factory import open_shop_backend

    with pytest.raises(ConfigError, match="run a server"):
        open_shop_backend("server", webshop_data=tmp_path)


@pytest.mark.catalog
def test_webshop_serve_command_prints_a_playable_goal_url(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from agentunit_gym.cli.main import build_parser
    from agentunit_gym.domains.webshop import DOMAIN
    from agentunit_gym.domains.webshop.cli import _serve
    from agentunit_gym.domains.webshop.serve import open_play_server
    from agentunit_gym.errors import TaskNotFoundError

    args = build_parser().parse_args(["webshop", "serve", "--goal", "webshop-0007"])
    assert args.func is _serve and args.goal == "webshop-0007"
    goal = next(t for t in DOMAIN.bundled_tasks() if t.id == "webshop-0007")
    seen: list[str] = []

    def visit() -> None:
        url = capsys.readouterr().out.split("open ", 1)[1].split()[0]
        assert url.endswith("/play/webshop-0007")
        seen.append(urllib.request.urlopen(url, timeout=10).read().decode())

    assert _serve(argparse.Namespace(goal="webshop-0007", host="127.0.0.1", port=0), wait=visit) == 0
    assert goal.instruction in seen[0] and "id='search_input'" in seen[0]
    with pytest.raises(TaskNotFoundError, match="no bundled WebShop goal"):
        open_play_server("webshop-9999")
