"""The shop's HTML pages in a real headless Chromium: search, open an item, choose options, buy,
read the reward, and a screenshot that is not blank.

Each step loads the URL the previous page links to (its search form's action, the link
whose text is the product or option): Chromium renders every page, the server keeps the
session. Skipped when Chromium is not installed, unless AGENTUNIT_REQUIRE_CHROMIUM=1.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from agentunit_gym.backends.shop.engine import Shop
from agentunit_gym.backends.shop.server import ShopServer, ShopService
from agentunit_gym.domains.webshop.task import WebShopTask

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium")
                 if p and Path(p).exists()), None)


@pytest.fixture(autouse=True)
def need_chromium() -> None:
    if CHROMIUM is None:
        if os.environ.get("AGENTUNIT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("AGENTUNIT_REQUIRE_CHROMIUM=1 but no chromium is installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed")


@pytest.fixture
def server(small_shop: Shop, small_goals: list[WebShopTask]) -> Iterator[ShopServer]:
    with ShopServer(ShopService(small_shop, {g.id: g.goal() for g in small_goals})) as running:
        yield running


def chromium(url: str, tmp: Path, *extra: str) -> str:
    assert CHROMIUM is not None
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
            *extra, url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def link(dom: str, text: str) -> str:
    """The href of the link whose visible text is ``text`` (case-insensitive)."""
    for href, label in re.findall(r'<a [^>]*href="([^"]+)"[^>]*>([^<]*)</a>', dom):
        if html.unescape(label).strip().lower() == text.lower():
            return html.unescape(href)
    raise AssertionError(f"no link {text!r} on the page")


def png_pixels_vary(path: Path) -> bool:
    """Whether the PNG's first image rows hold more than one distinct byte value (not a blank page)."""
    data = path.read_bytes()
    chunks, pos = [], 8
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            chunks.append(data[pos + 8:pos + 8 + length])
        pos += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    return len(set(raw[: 200_000])) > 10


def test_a_person_can_shop_a_goal_in_chromium(server: ShopServer, small_goals: list[WebShopTask],
                                              tmp_path: Path) -> None:
    task = next(t for t in small_goals if t.goal_options and t.reference_solution[1].tool == "click"
                and t.reference_solution[1].arguments != "Next >")
    # /play/<goal> starts a session and redirects to its page; Chromium follows the redirect.
    dom = chromium(f"{server.url}/play/{quote(task.id)}", tmp_path, "--dump-dom")
    assert task.instruction in html.unescape(dom) and 'id="search_input"' in dom
    action = re.search(r'<form action="([^"]+)"', dom)
    assert action is not None
    session_url = server.url + html.unescape(action.group(1)).removesuffix("/search")
    keywords = str(task.reference_solution[0].arguments)
    dom = chromium(f"{session_url}/search?keywords={quote(keywords)}", tmp_path, "--dump-dom")
    assert "Page 1 (Total results:" in dom
    dom = chromium(server.url + link(dom, task.asin), tmp_path, "--dump-dom")
    assert "Buy Now" in dom and "Price: $" in dom
    for value in task.goal_options.values():
        dom = chromium(server.url + link(dom, value), tmp_path, "--dump-dom")
        assert re.search(rf'class="btn opt chosen"[^>]*>{re.escape(html.escape(value, quote=False))}<', dom)
    shot = tmp_path / "item.png"
    chromium(f"{session_url}", tmp_path, f"--screenshot={shot}", "--window-size=1200,900")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    assert png_pixels_vary(shot)
    dom = chromium(server.url + link(dom, "Buy Now"), tmp_path, "--dump-dom")
    assert "Thank you for shopping with us!" in dom
    reward = re.search(r'id="reward">([0-9.]+)<', dom)
    assert reward is not None and float(reward.group(1)) == 1.0
