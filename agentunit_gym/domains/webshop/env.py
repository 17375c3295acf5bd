"""``AgentUnit/WebShop-v0``: WebShop's search-and-click shop, in process or over HTTP.

The agent reads WebShop's text-mode page and AgentBench's list of available actions, and
replies with one action:

- ``search[keywords]`` (tool ``search(keywords)``): from any page, as in WebShop's text env
  (the observation lists a search bar on the search page only).
- ``click[value]`` (tool ``click(value)``): a value from the clickables, case-insensitive.
  ``click[Buy Now]`` on an item page buys the product and ends the episode (tool
  ``buy_now()`` does the same).

In text, the action is found as AgentBench finds it: the first ``Action:`` followed by
``search[...]`` or ``click[...]`` (the brackets end at the first ``]``). A reply without
one is an invalid format. A click on something the page does not offer is an invalid action;
the feedback lists what can be clicked (``invalid_move="same_page"``, the AgentBench
protocols' setting: the page again, as WebShop shows it after an action it cannot take).

Reward: WebShop's reward of the purchase in [0, 1]; success means reward 1. Every part
(type match, attribute and option matches, price) is in ``info["score"]["components"]``.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from agentunit_gym.backends.shop.base import MoveResult, PageView, ShopBackend, ShopSession
from agentunit_gym.backends.shop.catalog import Catalog
from agentunit_gym.core.actions import (
    Action,
    ActionError,
    ActionIssue,
    Param,
    ToolSpec,
    looks_like_json_call,
    split_json_call,
)
from agentunit_gym.core.backend_handle import BackendHandle
from agentunit_gym.core.env import ActionFormat, AgentEnv, Execution, InvalidPolicy, TaskSource
from agentunit_gym.core.score import Score
from agentunit_gym.domains.webshop.domain import DOMAIN
from agentunit_gym.domains.webshop.prompt import PAGE_GUIDE
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.errors import ConfigError, EpisodeStateError

log = logging.getLogger(__name__)


_AGENTBENCH_TOOLS = {"search_action": ("search", "keywords"), "click_action": ("click", "value")}
"""AgentBench's tool-calling WebShop task names its tools so; their one argument is the value."""

_ACTION = re.compile(r"[Aa]ction: *\n* *((search|click)\[(.+?)])", re.DOTALL)
_OTHER = re.compile(r"[Aa]ction: *\n* *([A-Za-z_]\w*)\s*\[")

GRAMMAR = ("Reply with your reasoning, then one action, in one of these forms (the words in capitals stand for "
           "your own text):\n\nThought:\nYOUR REASONING\n\nAction:\nsearch[YOUR KEYWORDS]\nor\nAction:\n"
           "click[ONE OF THE CLICKABLES]")
"""How to reply, stated once: in the first observation (``info["grammar"]``)."""

INVALID_MOVES = ("feedback", "same_page")
"""Values of the env's ``invalid_move`` option: what the agent reads after a refused move."""

INTRO = f"{PAGE_GUIDE}\n\n{GRAMMAR}"
"""The first observation's head: how the pages work and how to reply, each said once (the chat
agent's system message says who the agent is, not these)."""


def webshop_folder_of(tasks: TaskSource) -> Path | None:
    """The WebShop data folder that ``tasks`` (already read) come from, when they are WebShop's
    human goals (``catalog: webshop-files``): the folder of their ``items_human_ins.json``;
    None for other tasks. Goals of WebShop's catalog must run over it, not the generated one.

    Raises:
        ConfigError: goals of WebShop's catalog that do not say which file they came from.
    """
    if isinstance(tasks, (str, Path)) or not tasks:
        return None
    goals = [t for t in tasks if isinstance(t, WebShopTask) and t.catalog == "webshop-files"]
    if not goals:
        return None
    folders = {Path(t.source.split("#", 1)[0]).parent for t in goals if t.source}
    if len(folders) != 1 or len(goals) != len([t for t in goals if t.source]):
        raise ConfigError("these WebShop goals are about WebShop's own catalog and do not name one data folder; "
                          "pass webshop_data=FOLDER (eval --env-option WebShop-v0:webshop_data=FOLDER).")
    return folders.pop()


def format_observation(view: PageView, *, first: bool = False) -> str:
    """A page as the agent reads it, in AgentBench's layout."""
    head = "The initial observation" if first else "Observation"
    return f"{head}:\n{view.text}\n\nAvailable Actions:\n{json.dumps(view.available_actions(), ensure_ascii=False)}"


@dataclass(frozen=True)
class SamePageRefusal(ActionError):
    """A refused move whose observation is the page again (WebShop performs nothing)."""

    page: str = ""

    def feedback(self) -> str:
        return self.page


class WebShopEnv(AgentEnv[WebShopTask]):
    """WebShop as a gymnasium env.

    Args:
        backend: ``"auto"`` or ``"embedded"`` (the shop in this process), or ``"server"``
            (the shop server in a container, or at ``url``).
        url: an existing shop server (``http://host:port``), for ``backend="server"``.
        tasks: the suite: None for the bundled goals, task files or folders, or task specs.
        max_steps: turn limit (default: the task's, else 10 as in AgentBench).
        invalid_action: ``"continue"`` or ``"terminate"`` (AgentBench's policy).
        invalid_move: what a refused move (a click on something the page does not list)
            shows: ``"feedback"`` (why, and the available actions) or ``"same_page"`` (the
            page again, as WebShop does; the AgentBench protocols' setting). Either way it is
            an invalid action in ``info``.
        render_mode: None or ``"ansi"``.
        split: ``"train"`` or ``"test"``: the suite restricted to that split (docs/tasks.md, "Splits").
        action_format: ``"text"`` (default) or ``"tools"``: tool calls only (see ``AgentEnv``).
        catalog_size, catalog_seed: the generated catalog (default 100k products, seed 0).
        webshop_data: a folder with WebShop's own files instead of the generated catalog.
        shop_backend: an already open shop backend to use; the env does not close it.

    Raises:
        ConfigError: an unknown option value.
        BackendUnavailableError: the shop server cannot be started or reached.
    """

    DOMAIN = DOMAIN
    grammar: ClassVar[str] = GRAMMAR
    tools: ClassVar[tuple[ToolSpec, ...]] = (
        ToolSpec("search", "Search the shop (from any page; it starts over on a new results page).",
                 (Param("keywords", "string", "the search keywords"),)),
        ToolSpec("click", "Click a button, product or option: one of the clickables.",
                 (Param("value", "string", "the clickable's text"),)),
        ToolSpec("buy_now", "Buy the product shown with the options chosen (ends the task).", (), commits=True),
    )

    def __init__(
        self,
        *,
        backend: str = "auto",
        url: str | None = None,
        tasks: TaskSource = None,
        max_steps: int | None = None,
        invalid_action: InvalidPolicy = "continue",
        invalid_move: str = "feedback",
        render_mode: str | None = None,
        split: str | None = None,
        action_format: ActionFormat = "text",
        catalog_size: int | None = None,
        catalog_seed: int | None = None,
        webshop_data: str | Path | None = None,
        shop_backend: ShopBackend | None = None,
        **backend_options: Any,
    ) -> None:
        self._session: ShopSession | None = None
        DOMAIN.check_backend(backend)
        if invalid_move not in INVALID_MOVES:
            raise ConfigError(f"invalid_move must be 'feedback' or 'same_page', got {invalid_move!r}; "
                              "pass one of them.")
        self.invalid_move = invalid_move
        if webshop_data is None and isinstance(tasks, (str, Path)) and DOMAIN.detect_format(tasks) == "webshop":
            webshop_data, tasks = tasks, None  # WebShop's data folder: its goals over its own catalog
        if webshop_data is None and shop_backend is None and url is None:
            webshop_data = webshop_folder_of(tasks)  # its goals, read earlier (eval --tasks): the same catalog
        catalog: Catalog | None = None
        if webshop_data is not None and shop_backend is None:
            from agentunit_gym.backends.shop.factory import open_catalog
            from agentunit_gym.domains.webshop.loader import load_webshop_goals

            catalog = open_catalog(catalog_size=catalog_size, catalog_seed=catalog_seed, webshop_data=webshop_data)
            if tasks is None:
                tasks = load_webshop_goals(webshop_data, catalog)
        super().__init__(tasks=tasks, max_steps=max_steps, invalid_action=invalid_action, render_mode=render_mode,
                         split=split, action_format=action_format)
        self._shop: BackendHandle[ShopBackend]
        if shop_backend is not None:
            self._shop = BackendHandle.borrowed(shop_backend, refusal=(
                "it runs on a shop backend object it was given (shop_backend=...); make it with "
                "backend='embedded' or 'server' (and url=) so a copy can open its own."))
        else:
            opened: ShopBackend = DOMAIN.open_backend(backend, url=url, catalog_size=catalog_size,
                                                      catalog_seed=catalog_seed, catalog=catalog, **backend_options)
            # A copy in another process reopens the resolved kind, not "auto"; the catalog by its
            # data folder (the catalog object holds caches that do not pickle).
            self._shop = BackendHandle.owned(opened, reopen=partial(
                _open_shop, opened.kind, url, catalog_size, catalog_seed,
                None if webshop_data is None else str(webshop_data), dict(backend_options)))
        log.debug("WebShop env on the %s backend (asked for %r)", self._shop.kind, backend)

    # ------------------------------------------------------------------ hooks

    @property
    def backend_name(self) -> str:
        return self._shop.kind

    @property
    def shop_backend(self) -> ShopBackend:
        return self._shop.get()

    @property
    def view(self) -> PageView:
        """The page the agent is on."""
        return self._episode().view

    def parse_action(self, text: str) -> Action | ActionError:
        """Like the base, and AgentBench's function-calling tool names (``search_action``,
        ``click_action``, whose one argument it reads by position) are accepted too."""
        if isinstance(text, str) and looks_like_json_call(text):
            call = split_json_call(text)
            if not isinstance(call, ActionError) and call[0] in _AGENTBENCH_TOOLS and len(call[1]) == 1:
                tool, param = _AGENTBENCH_TOOLS[call[0]]
                (value,) = call[1].values()
                text = json.dumps({"name": tool, "arguments": {param: value}}, ensure_ascii=False)
        parsed = super().parse_action(text)
        return parsed if isinstance(parsed, ActionError) else self._validate(parsed)

    def _start_episode(self, task: WebShopTask) -> str:
        self._session = self._shop.get().open_session(task.goal())
        return f"{INTRO}\n\n{format_observation(self._session.view, first=True)}"

    def _parse_react(self, text: str) -> Action | ActionError:
        match = _ACTION.search(text)
        if match is None:
            other = _OTHER.search(text)
            if other is not None:
                return ActionError(
                    ActionIssue.UNKNOWN_TOOL, f"unknown action {other.group(1)!r}; the actions are search and click.",
                    hint="Write 'Action:' then search[keywords] or click[value].", tool=other.group(1),
                )
            return ActionError(
                ActionIssue.NO_CALL, "no action found: write 'Action:' followed by search[keywords] or click[value].",
            )
        thought = text[: match.start()].strip()
        argument = match.group(3)
        if match.group(2) == "search":
            return Action("search", {"keywords": argument}, thought=thought)
        return Action("click", {"value": argument}, thought=thought)

    def _validate(self, action: Action) -> Action | ActionError:
        if self._session is None:
            return action  # parsed outside an episode: nothing to check against
        view = self._session.view
        if action.tool == "search":
            if not str(action.arguments["keywords"]).strip():
                return ActionError(ActionIssue.INVALID_PARAMETER, "search needs keywords.", tool="search")
            return action
        if action.tool == "click":
            value = " ".join(str(action.arguments["value"]).lower().split())
            if value == "search" or value not in view.clickables:
                return self._not_here(view, f"{action.arguments['value']!r} is not clickable on this page.", "click")
            if value == "buy now":
                return Action("buy_now", {}, form=action.form, thought=action.thought)
            return action
        if "buy now" not in view.clickables:
            return self._not_here(view, "Buy Now is only on a product page.", "buy_now")
        return action

    def _not_here(self, view: PageView, message: str, tool: str) -> ActionError:
        if self.invalid_move == "same_page":
            return SamePageRefusal(ActionIssue.NOT_ALLOWED, message, tool=tool, page=format_observation(view))
        return ActionError(
            ActionIssue.NOT_ALLOWED, message,
            hint=f"Available actions: {json.dumps(view.available_actions(), ensure_ascii=False)}", tool=tool,
        )

    def _execute(self, action: Action) -> Execution:
        session = self._episode()
        if action.tool == "search":
            result = session.search(str(action.arguments["keywords"]))
        else:
            result = session.click(str(action.arguments["value"]))
        return self._observe(result)

    def _observe(self, result: MoveResult) -> Execution:
        view = result.view
        details: dict[str, Any] = {"page": view.page, "available_actions": view.available_actions()}
        if result.refused is not None:
            details["refused"] = result.refused
            return Execution(f"Invalid action: {result.refused}\n\n{format_observation(view)}", details, error=True)
        return Execution(format_observation(view), details)

    def _score(self, action: Action | None) -> Score:
        task = self.task
        if task is None:
            raise EpisodeStateError("no episode to score.")
        if action is None:
            return Score.failed("nothing was bought", purchased=False)
        result = self._episode().click("Buy Now")
        view = result.view
        if view.page != "done" or view.reward is None:
            return Score.failed(f"the purchase did not go through: {result.refused or view.page}", purchased=False)
        parts = dict(view.reward_components or {})
        reward = float(view.reward)
        components: dict[str, float | int | bool | str | None] = {
            k: v for k, v in parts.items() if isinstance(v, (int, float, bool, str)) or v is None
        }
        components.update(purchased=True, asin=view.asin, target_asin=task.asin,
                          options=json.dumps(view.options, sort_keys=True))
        success = reward >= 1.0 - 1e-9
        detail = "bought a product that meets every part of the goal" if success else (
            f"reward {reward:.3f}: type {parts.get('r_type')}, attributes {parts.get('num_attr_matches')}/"
            f"{len(task.attributes)}, options {parts.get('num_option_matches')}/{len(task.goal_options)}, "
            f"price ok {parts.get('r_price')}")
        return Score(reward=reward, success=success, components=components, detail=detail)

    def _render_react(self, tool: str, arguments: dict[str, Any]) -> str:
        if tool == "search":
            return f"Thought:\nI think I should search for the product.\n\nAction:\nsearch[{arguments['keywords']}]"
        if tool == "buy_now":
            return "Thought:\nI think I should buy it now.\n\nAction:\nclick[Buy Now]"
        return f"Thought:\nI think I should click {arguments['value']}.\n\nAction:\nclick[{arguments['value']}]"

    def _end_episode(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    # --------------------------------------------------------------- private

    _live_state = ("_session",)

    def _episode(self) -> ShopSession:
        if self._session is None:
            raise EpisodeStateError("no episode is running: call reset() first.")
        return self._session


def _open_shop(kind: str, url: str | None, size: int | None, seed: int | None, data: str | None,
               options: dict[str, Any]) -> ShopBackend:
    """The shop a pickled or copied env opens in its process (a module function, so it pickles)."""
    from agentunit_gym.backends.shop.factory import open_catalog

    catalog = None if data is None else open_catalog(catalog_size=size, catalog_seed=seed, webshop_data=data)
    shop: ShopBackend = DOMAIN.open_backend(kind, url=url, catalog_size=size, catalog_seed=seed, catalog=catalog,
                                            **options)
    return shop
