"""The WebShop domain's description: every fact the rest of agentunit-gym reads about it."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.core.domain import BackendSpec, Domain, DomainImage, EnvSpec, TaskGenerator, TaskLoader
from agentunit_gym.domains.webshop.goals import goal_family
from agentunit_gym.domains.webshop.keys import webshop_task_keys
from agentunit_gym.domains.webshop.metrics import HEADLINE, METRICS, REPORT_SECTIONS
from agentunit_gym.domains.webshop.prompt import PROMPT
from agentunit_gym.domains.webshop.protocols import PROTOCOLS
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.tasks.loader import LoadResult

_HERE = Path(__file__).parent
_IMAGES = _HERE.parent.parent / "images"

STEP_LIMIT = 10
"""AgentBench's turn limit for WebShop (its 0.2 task; its later tool-calling task allows 20)."""


def _is_webshop_data(path: Path) -> bool:
    return path.is_dir() and (path / "items_human_ins.json").is_file() and any(
        (path / name).is_file() for name in ("items_shuffle.json", "items_shuffle_1000.json"))


def _load_webshop_data(path: Path) -> LoadResult:
    from agentunit_gym.domains.webshop.loader import load_webshop_catalog, load_webshop_goals

    return LoadResult(tuple(load_webshop_goals(path, load_webshop_catalog(path))))


DOMAIN = Domain(
    name="webshop",
    title="Web shopping",
    description="The agent searches a shop of 100k generated products, opens items, chooses options and "
                "buys; WebShop's reward scores the purchase against the goal's product type, attributes, "
                "options and price.",
    envs=(EnvSpec("AgentUnit/WebShop-v0", "agentunit_gym.domains.webshop.env:WebShopEnv"),),
    step_limit=STEP_LIMIT,
    backends=(
        BackendSpec("embedded", "the shop engine in the env's process (bm25s index, memory-mapped), no daemon",
                    embedded=True, options_from=("agentunit_gym.backends.shop.engine:Shop.open",)),
        BackendSpec("server", "the shop as an HTTP server in the project's webshop container, or at a url",
                    needs_docker=True, options_from=("agentunit_gym.backends.shop.client:ServerShopBackend",
                                                     "agentunit_gym.backends.shop.client:ServerShopBackend.start_container")),
    ),
    backend_factory="agentunit_gym.backends.shop.factory:open_shop_backend",
    task_model=WebShopTask,
    loaders=(
        TaskLoader("webshop", "WebShop's data folder (items_shuffle*.json, items_ins_v2*.json, "
                              "items_human_ins.json): its human goals over its own catalog",
                   detect=_is_webshop_data, load=_load_webshop_data),
    ),
    suite=_HERE / "suite",
    task_keys=webshop_task_keys,
    task_family=goal_family,
    generator=TaskGenerator(
        "goals over the default 100k-product catalog, at most one per product (~3-5 ms a goal), "
        "with the reference purchase replayed to reward 1 before a goal is kept",
        generate="agentunit_gym.domains.webshop.goals:generate",
        templates="agentunit_gym.domains.webshop.goals:templates",
    ),
    traps=_HERE / "traps.yaml",
    criteria=_HERE / "criteria.yaml",
    prompt=PROMPT,
    metrics=METRICS,
    headline=HEADLINE,
    report_sections=REPORT_SECTIONS,
    protocols=PROTOCOLS,
    cli="agentunit_gym.domains.webshop.cli:register",
    image=DomainImage("webshop", _IMAGES / "webshop"),
)
