"""The serve image, OpenEnv's Docker provider and client on it, and the OpenEnv env folder.

- ``agentunit-gym images build serve`` gives an image whose command runs ``agentunit-gym serve``
  on port 8000 (OpenEnv's provider maps it); it answers OpenEnv's readiness probe
  (``GET /health`` without a token) and refuses to start without a token.
- OpenEnv's own ``LocalDockerProvider`` starts it through ``AgentUnitEnvClient.from_docker_image``,
  and the client, sending the token, plays an oracle DB episode to reward 1; OpenEnv's generic
  client, sending none, is refused with 401.
- The OS env in the container: the local sandbox cannot make namespaces under Docker's default
  confinement, and the server refuses to start rather than run the agent unisolated.
- ``openenv validate envs/agentunit_env`` passes (the manifest, pyproject, uv.lock, server/app.py).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import secrets
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core.generic_client")

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.backends import process  # noqa: E402
from agentunit_gym.backends import serve_image as image_context  # noqa: E402
from agentunit_gym.core.reference import OutputReply  # noqa: E402
from agentunit_gym.serve.openenv_client import AgentUnitEnvClient  # noqa: E402
from tests.serve.helpers import http, oracle_replies  # noqa: E402
from tests.waiting import wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENV_FOLDER = ROOT / "envs" / "agentunit_env"
TASK = "db-weather-03"
CONTAINER_DEADLINE_S = 240.0


# ------------------------------------------------------------------ the generated build context


def test_the_image_takes_the_installed_versions_of_the_serve_closure() -> None:
    pins = image_context.dependency_pins()
    import importlib.metadata as md

    for name in ("openenv-core", "uvicorn", "websockets", "gymnasium", "sqlparse", "fastapi"):
        assert pins[name] == md.version(name), name
    assert "agentunit-gym" not in pins
    assert "pytest" not in pins and "docker" not in pins  # test and docker extras stay out
    # Markers are the image's (CPython 3.11 on Linux): a Windows-only requirement is left out.
    assert "colorama" not in pins and "pywin32" not in pins


def test_platform_tags_reach_from_bookworms_glibc_down_to_manylinux1() -> None:
    tags = image_context.platform_tags("x86_64")
    assert tags[0] == "manylinux_2_36_x86_64" and tags[-1] == "linux_x86_64"
    assert {"manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_37_x86_64" not in tags


def test_the_own_wheel_holds_the_package_its_entry_points_and_a_true_record(tmp_path: Path) -> None:
    wheel = image_context.build_own_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        assert "agentunit_gym/serve/openenv_client.py" in names
        assert "agentunit_gym/images/serve/entrypoint.sh" in names
        assert not any("__pycache__" in n for n in names)
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
        assert "[agentunit_gym.domains]" in entry_points
        assert "agentunit-gym = agentunit_gym.cli.main:main" in entry_points
        record = archive.read(f"{dist_info}/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if name.endswith("/RECORD"):
                continue
            data = archive.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data), name
        assert len(record) == len(names)
    installed = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                           str(installed), str(wheel)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (installed / "agentunit_gym" / "serve" / "server.py").read_bytes() == \
        (ROOT / "agentunit_gym" / "serve" / "server.py").read_bytes()


# ------------------------------------------------------------------ OpenEnv's manifest


def test_openenv_validate_accepts_the_env_folder() -> None:
    done = subprocess.run([sys.executable, "-m", "openenv.cli", "validate", str(ENV_FOLDER), "--json", "--verbose"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["passed"] is True and report["issues"] == []
    assert report["environment"] == "agentunit"
    assert report["deployment_modes"]["docker"] is False  # the image comes from `agentunit-gym images build serve`
    assert report["deployment_modes"]["openenv_serve"] is True


def test_openenv_validate_names_what_a_broken_folder_lacks(tmp_path: Path) -> None:
    broken = tmp_path / "agentunit_env"
    broken.mkdir()
    (broken / "openenv.yaml").write_text((ENV_FOLDER / "openenv.yaml").read_text())
    (broken / "pyproject.toml").write_text((ENV_FOLDER / "pyproject.toml").read_text())
    done = subprocess.run([sys.executable, "-m", "openenv.cli", "validate", str(broken), "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    issues = json.loads(done.stdout)["issues"]
    assert any("uv.lock" in issue for issue in issues) and "Missing server/app.py" in issues


def test_the_env_folders_server_refuses_to_listen_without_a_token() -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "AGENTUNIT_GYM_TOKEN"}, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ENV_FOLDER / "server" / "app.py")], capture_output=True, text=True,
                          timeout=120, check=False, env=env, cwd=ENV_FOLDER)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "needs a token" in done.stderr


def _load_env_folder_app() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("agentunit_env_server_app", ENV_FOLDER / "server" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_env_folders_app_needs_a_token_and_serves_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.testclient import TestClient

    from agentunit_gym.errors import ConfigError

    module = _load_env_folder_app()
    monkeypatch.delenv("AGENTUNIT_GYM_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="needs a token"):
        module.app  # noqa: B018 - the attribute builds the app
    monkeypatch.setenv("AGENTUNIT_GYM_TOKEN", "s3cret")
    monkeypatch.setenv("AGENTUNIT_GYM_BACKEND", "sqlite")
    client = TestClient(module.app)
    assert client.get("/metadata").status_code == 401
    health = client.get("/health", headers={"Authorization": "Bearer s3cret"}).json()
    assert (health["env_id"], health["backend"]) == ("AgentUnit/DB-v0", "sqlite")


# ------------------------------------------------------------------ the image, with Docker


@pytest.fixture(scope="module")
def serve_image() -> str:
    from agentunit_gym.backends.images import ensure_image

    return ensure_image("serve")


def _run(image: str, environment: dict[str, str]) -> Any:
    client = process.docker_client()
    return client.containers.run(image, detach=True, environment=environment,
                                 labels={"agentunit_gym": "1", "agentunit_gym.test": "openenv-image"})


def _exited(container: Any) -> tuple[int, str]:
    """The container's exit code and logs, once it has stopped (within the deadline)."""
    def stopped() -> bool:
        container.reload()
        return bool(container.status == "exited")

    wait_until(stopped, CONTAINER_DEADLINE_S, "the container's exit")
    return int(container.attrs["State"]["ExitCode"]), container.logs().decode("utf-8", "replace")


@pytest.mark.docker
@pytest.mark.slow
def test_the_serve_image_runs_agentunit_gym_serve_on_port_8000(serve_image: str) -> None:
    image = process.docker_client().images.get(serve_image)
    config = image.attrs["Config"]
    assert config["Entrypoint"] == ["/usr/bin/tini", "--", "/usr/local/bin/agentunit-gym-serve"]
    assert "8000/tcp" in config["ExposedPorts"] and config["User"] == "agentunit-gym"
    assert image.labels["agentunit_gym.image"] == "serve"
    script = (ROOT / "agentunit_gym" / "images" / "serve" / "entrypoint.sh").read_text()
    assert "exec agentunit-gym serve --env" in script and "--host 0.0.0.0 --port 8000 --check-reset" in script


@pytest.mark.docker
@pytest.mark.slow
def test_the_container_refuses_to_start_without_a_token(serve_image: str) -> None:
    container = _run(serve_image, {})
    try:
        code, logs = _exited(container)
    finally:
        container.remove(force=True)
    assert code == 2 and "needs a token" in logs, logs[-2000:]


@pytest.mark.docker
@pytest.mark.slow
def test_the_os_env_in_the_container_refuses_rather_than_run_unisolated(serve_image: str) -> None:
    container = _run(serve_image, {"AGENTUNIT_GYM_TOKEN": "t" * 24, "AGENTUNIT_GYM_ENV": "OS-v0"})
    try:
        code, logs = _exited(container)
    finally:
        container.remove(force=True)
    # --check-reset: the server stops before it listens, saying why; it never runs the agent open.
    assert code == 1, logs[-3000:]
    assert "the local sandbox needs Linux namespaces" in logs, logs[-3000:]
    assert "agentunit-gym serve: OS-v0 on" not in logs


RELAXED = ("seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined")
"""The container options under which the local sandbox can make its namespaces (docs/serving.md)."""


@pytest.mark.docker
@pytest.mark.slow
def test_the_os_env_in_a_relaxed_container_runs_in_the_local_sandbox(serve_image: str) -> None:
    token = secrets.token_urlsafe(24)
    # The docker CLI: `systempaths=unconfined` is a CLI option (no masked /proc paths), not the SDK's.
    started = subprocess.run(
        ["docker", "run", "-d", *(arg for option in RELAXED for arg in ("--security-opt", option)),
         "-p", "127.0.0.1::8000", "-e", "AGENTUNIT_GYM_ENV=OS-v0", "-e", "AGENTUNIT_GYM_TOKEN",
         "--label", "agentunit_gym=1", "--label", "agentunit_gym.test=openenv-image", serve_image],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "AGENTUNIT_GYM_TOKEN": token})
    assert started.returncode == 0, started.stderr
    container = process.docker_client().containers.get(started.stdout.strip())
    try:
        def listening() -> str | None:
            container.reload()
            assert container.status != "exited", container.logs().decode()[-3000:]
            bindings = container.attrs["NetworkSettings"]["Ports"].get("8000/tcp") or []
            if not bindings:
                return None
            url = f"http://127.0.0.1:{bindings[0]['HostPort']}"
            try:
                return url if http("GET", url + "/health", timeout_s=2.0)[0] == 200 else None
            except OSError:
                return None

        url = wait_until(listening, CONTAINER_DEADLINE_S, "the OS server's /health")

        async def one_step() -> str:
            client = AgentUnitEnvClient(base_url=url, token=token)
            try:
                await client.reset(seed=0)
                result = await client.step('{"name": "bash", "arguments": {"script": "hostname; echo $$; id -u"}}')
                return str(result.observation["text"])
            finally:
                await client.close()

        text = asyncio.run(one_step())
    finally:
        container.remove(force=True)
    # The agent's shell is in the sandbox's namespaces: its own hostname, PID 1, root there.
    assert text.split()[-3:] == ["sandbox", "1", "0"], text


async def _play_oracle(client: AgentUnitEnvClient) -> tuple[float | None, bool, dict[str, Any]]:
    with gym.make("AgentUnit/DB-v0", backend="sqlite") as local:
        local.reset(seed=0, options={"task_id": TASK})
        replies = oracle_replies(local)
    result = await client.reset(seed=0, options={"task_id": TASK})
    for reply in replies:
        text = reply.complete(result.observation["text"]) if isinstance(reply, OutputReply) else reply
        result = await client.step(text)
        if result.done:
            break
    return result.reward, result.done, result.observation["info"]


@pytest.mark.docker
@pytest.mark.slow
def test_openenvs_docker_provider_starts_the_image_and_the_client_with_the_token_plays(serve_image: str) -> None:
    from openenv.core.containers.runtime import LocalDockerProvider
    from openenv.core.generic_client import GenericEnvClient

    token = secrets.token_urlsafe(24)
    provider = LocalDockerProvider()

    async def scenario() -> tuple[Any, ...]:
        client = await AgentUnitEnvClient.from_docker_image(serve_image, provider=provider, token=token,
                                                            env="DB-v0", backend="sqlite")
        try:
            base_url = client._ws_url.removesuffix("/ws").replace("ws://", "http://")
            reward, done, info = await _play_oracle(client)
            # OpenEnv's own client sends no token: the same server refuses its session.
            stranger = GenericEnvClient(base_url=base_url)
            with pytest.raises(ConnectionError, match="401"):
                await stranger.connect()
            probe = http("GET", base_url + "/health")
            health = http("GET", base_url + "/health", token=token)
            return reward, done, info, probe, health
        finally:
            await client.close()

    reward, done, info, probe, health = asyncio.run(scenario())
    assert (reward, done) == (1.0, True) and info["finish_reason"] == "complete"
    assert probe == (200, {"status": "healthy"})
    assert health[0] == 200 and health[1]["env_id"] == "AgentUnit/DB-v0" and health[1]["backend"] == "sqlite"
    # close() stopped and removed the provider's container.
    left = process.docker_client().containers.list(all=True, filters={"ancestor": serve_image})
    assert [c.name for c in left if c.name.startswith(serve_image.split("/")[-1].split(":")[0])] == []


# ------------------------------------------------------------------ listing images


class _FakeImage:
    id = "sha256:base"


class _FakeImages:
    def get(self, ref: str) -> _FakeImage:
        from docker.errors import ImageNotFound

        if ref != "debian:bookworm-slim":
            raise ImageNotFound(ref)
        return _FakeImage()

    def list(self, **_: Any) -> list[Any]:
        return []


class _FakeDocker:
    images = _FakeImages()


def test_listing_images_prepares_no_generated_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`agentunit-gym images list` must not download the serve image's wheels: an image whose
    generated context was never prepared is listed as not current, and nothing is generated."""
    import types

    from agentunit_gym.backends import images

    prepared: list[Path] = []
    generator = types.ModuleType("fake_generator")
    generator.context_key = lambda: "key-1"  # type: ignore[attr-defined]
    generator.prepare_context = prepared.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_generator", generator)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    monkeypatch.setitem(images._sources, "fake-generated", images.ImageSource(shipped, generator="fake_generator"))
    monkeypatch.setenv("AGENTUNIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(images, "_unprepared", lambda name, real=images._unprepared: real(name)
                        if name == "fake-generated" else True)
    tagged: list[str] = []
    real_tag = images.image_tag
    monkeypatch.setattr(images, "image_tag", lambda name, **kw: tagged.append(name) or real_tag(name, **kw))
    assert images.list_images(client=_FakeDocker()) == []
    assert prepared == [] and tagged == []
    images.image_dir("fake-generated")  # prepared on purpose (a build does this)
    assert len(prepared) == 1
    assert images.list_images(client=_FakeDocker()) == []
    assert tagged == ["fake-generated"] and len(prepared) == 1  # its tag, from the cached context
