"""A domain's facts live in its Domain: the CLI commands and the image it declares reach the
CLI and the image builder through the registry, and an env reads its name, task model and
step limit from its description."""

from __future__ import annotations

import argparse
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.backends import images
from agentunit_gym.cli.main import build_parser
from agentunit_gym.core import registry
from agentunit_gym.core.domain import BackendSpec, Domain, DomainImage, EnvSpec, Prompt
from agentunit_gym.errors import ConfigError
from tests.core.toy import TOY_DOMAIN, ToyEnv, ToyTask

HERE = Path(__file__).parent
CONTEXT = HERE / "extra_image"


OPENED: list[tuple[str, dict[str, Any]]] = []


def open_extra(kind: str, **options: Any) -> str:
    """The extra domain's backend factory: records what it was asked for."""
    OPENED.append((kind, options))
    return f"backend:{kind}"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """The extra domain's command group."""
    group = sub.add_parser("extra", help="the extra domain's own command")
    group.set_defaults(func=lambda args: 7)


EXTRA = Domain(
    name="extra",
    title="Extra",
    envs=(EnvSpec("ExtraCorp/Extra-v0", "tests.core.toy:ToyEnv"),),
    step_limit=3,
    backends=(BackendSpec("inline", "in memory", embedded=True),),
    task_model=ToyTask,
    prompt=Prompt("You say numbers."),
    backend_factory="tests.core.test_domain_facts:open_extra",
    cli="tests.core.test_domain_facts:register",
    image=DomainImage("extra-image", CONTEXT),
)
"""A third party's domain with a command and an image of its own."""

CLASH = replace(EXTRA, name="clash", envs=(EnvSpec("ExtraCorp/Clash-v0", "tests.core.toy:ToyEnv"),),
                cli=None, image=DomainImage("os", CONTEXT))
"""A domain declaring an image name a built-in domain already has, from another folder."""


class _EntryPoint:
    def __init__(self, name: str, value: str) -> None:
        self.name, self.value = name, value


@pytest.fixture
def with_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    CONTEXT.mkdir(exist_ok=True)
    (CONTEXT / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n", encoding="utf-8")
    real = metadata.entry_points

    def entry_points(group: str) -> Any:
        return [*real(group=group), _EntryPoint("extra", "tests.core.test_domain_facts:EXTRA"),
                _EntryPoint("clash", "tests.core.test_domain_facts:CLASH")]

    monkeypatch.setattr(registry.metadata, "entry_points", entry_points)
    monkeypatch.setattr(images, "_sources", dict(images._sources))  # undone with the patch
    registry.reload()
    try:
        yield
    finally:
        monkeypatch.undo()
        registry.reload()
        (CONTEXT / "Dockerfile").unlink()
        CONTEXT.rmdir()


@pytest.mark.usefixtures("with_extra")
def test_a_domains_cli_reaches_the_command_line() -> None:
    parser = build_parser()
    args = parser.parse_args(["extra"])
    assert args.func(args) == 7
    # The built-in WebShop commands come the same way, from its description.
    assert registry.get_domain("webshop").cli == "agentunit_gym.domains.webshop.cli:register"
    assert parser.parse_args(["webshop", "serve", "--port", "0"]).webshop_command == "serve"


@pytest.mark.usefixtures("with_extra")
def test_a_domains_image_reaches_the_builder() -> None:
    registry.domains()  # the registry loads (as `import agentunit_gym` does) and tells the builder
    assert "extra-image" in images.available_images()
    assert images.image_dir("extra-image") == CONTEXT
    # Another domain's "os" from a different folder is set aside; the built-in image stays.
    broken = {b.name: b.reason for b in registry.broken_domains()}
    assert "clash" not in registry.domain_names() and "declare the image 'os'" in broken["clash"]
    assert images.image_dir("os") == Path(images.IMAGES_ROOT) / "os"


def test_the_built_in_images_are_declared_by_their_domains() -> None:
    declared = {d.name: d.image.name for d in registry.domains() if d.image is not None}
    assert {k: declared[k] for k in ("os", "db", "kg", "webshop")} == \
        {"os": "os", "db": "mariadb", "kg": "kg", "webshop": "webshop"}
    assert set(declared.values()) <= set(images.available_images())


def test_a_malformed_cli_target_is_refused() -> None:
    with pytest.raises(ConfigError, match="cli 'nowhere' must be 'module:function'"):
        replace(EXTRA, cli="nowhere")


def test_an_env_reads_its_facts_from_its_domain() -> None:
    class OtherToy(ToyEnv):
        DOMAIN = replace(TOY_DOMAIN, name="other", step_limit=9)

    env = OtherToy()
    _, info = env.reset(options={"task_id": "t2"})
    assert (env.domain, env.default_max_steps, env.task_model) == ("other", 9, ToyTask)
    assert (info["domain"], info["max_steps"]) == ("other", 9)
    env.close()


def test_backends_open_through_the_domains_factory() -> None:
    OPENED.clear()
    assert EXTRA.open_backend("auto", dsn="x") == "backend:auto"
    assert EXTRA.open_backend("inline") == "backend:inline"
    with pytest.raises(ConfigError, match="no backend 'mysql'; use auto or one of inline"):
        EXTRA.open_backend("mysql")
    assert OPENED == [("auto", {"dsn": "x"}), ("inline", {})]  # a bad name never reaches the factory
    with pytest.raises(ConfigError, match="declares no backend_factory"):
        TOY_DOMAIN.open_backend("toy")


def test_the_built_in_envs_refuse_an_unknown_backend_by_their_domains_names() -> None:
    import gymnasium as gym

    for domain in registry.domains():
        with pytest.raises(ConfigError, match=f"the {domain.name} domain has no backend 'nope'"):
            gym.make(domain.env_ids[0], backend="nope")


def test_gym_make_puts_the_wrappers_registration_names_over_every_env() -> None:
    import gymnasium as gym

    from agentunit_gym.wrappers.limits import EndTruncatedEpisode
    from agentunit_gym.wrappers.registration import MAKE_WRAPPERS

    assert MAKE_WRAPPERS == (EndTruncatedEpisode,)
    for env_id in registry.env_ids():
        assert [w.entry_point for w in gym.spec(env_id).additional_wrappers] == \
            ["agentunit_gym.wrappers.limits:EndTruncatedEpisode"], env_id
    env = gym.make("AgentUnit/DB-v0", backend="sqlite", max_episode_steps=2)
    layer: Any = env
    while not isinstance(layer, EndTruncatedEpisode):
        layer = layer.env  # AttributeError at the bottom: the wrapper is missing
    env.reset(seed=0)
    env.step("Action: Operation\n```sql\nSELECT 1;\n```")
    *_, truncated, info = env.step("Action: Operation\n```sql\nSELECT 1;\n```")
    assert truncated and info["finish_reason"].value == "task_limit"
    env.close()
