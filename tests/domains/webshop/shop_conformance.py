"""Shop behaviour every backend must show (embedded, server in a thread, server in a container).

``check_*`` functions take an open backend and a goal over the small catalog; the test
modules call them once per backend. The pages asserted here are WebShop's text mode.
"""

from __future__ import annotations

from agentunit_gym.backends.shop.base import ShopBackend
from agentunit_gym.backends.shop.catalog import Catalog
from agentunit_gym.domains.webshop.task import WebShopTask

SEP = " [SEP] "


def check_search_page(backend: ShopBackend, task: WebShopTask) -> None:
    session = backend.open_session(task.goal())
    view = session.view
    assert view.page == "search"
    assert view.text == f"WebShop [SEP] Instruction: [SEP] {task.instruction} [SEP] Search"
    assert view.has_search_bar and view.clickables == ("search",)
    refused = session.click("search")
    assert refused.refused is not None and refused.view == view
    assert session.search("   ").refused is not None
    session.close()


def check_results_paging(backend: ShopBackend, task: WebShopTask, catalog: Catalog) -> None:
    session = backend.open_session(task.goal())
    first = session.search("Cotton T-Shirt").view
    assert first.page == "results" and not first.has_search_bar
    parts = first.text.split(SEP)
    assert parts[:5] == ["Instruction:", task.instruction, "Back to Search", "Page 1 (Total results: 50)", "Next >"]
    asins = parts[5::3]
    assert len(asins) == 10
    for asin, title, price in zip(parts[5::3], parts[6::3], parts[7::3], strict=True):
        product = catalog.get(asin)
        assert product is not None and product.title == title and price == product.price_tag
    assert first.clickables == ("back to search", "next >", *[a.lower() for a in asins])
    second = session.click("Next >").view
    assert "Page 2 (Total results: 50)" in second.text
    assert second.clickables[:3] == ("back to search", "< prev", "next >")
    assert second.text.split(SEP)[4:6] == ["< Prev", "Next >"]
    for _ in range(3):
        last = session.click("next >").view
    assert "Page 5 (Total results: 50)" in last.text and "next >" in last.clickables  # WebShop always shows it
    past = session.click("Next >").view
    assert past.text.split(SEP)[3:] == ["Page 6 (Total results: 50)", "< Prev", "Next >"]  # no products
    assert past.clickables == ("back to search", "< prev", "next >")
    session.click("< Prev")
    back = session.click("< Prev").view
    assert "Page 4 (Total results: 50)" in back.text
    home = session.click("Back to Search").view
    assert home.page == "search" and home.has_search_bar
    session.close()


def check_item_and_sub_pages(backend: ShopBackend, task: WebShopTask, catalog: Catalog) -> None:
    product = catalog.get(task.asin)
    assert product is not None
    session = backend.open_session(task.goal())
    session.search(product.title)
    item = session.click(product.asin.lower()).view  # clicks compare case-insensitively
    assert item.page == "item" and item.asin == product.asin
    expected = ["Instruction:", task.instruction, "Back to Search", "< Prev"]
    for name, values in product.options.items():
        expected += [name, *values]
    expected += [product.title, f"Price: {product.price_tag}", "Rating: N.A.",
                 "Description", "Features", "Reviews", "Buy Now"]
    assert item.text.split(SEP) == expected
    values = [v for vs in product.options.values() for v in vs]
    assert item.clickables == ("back to search", "< prev", "description", "features", "reviews", "buy now",
                               *dict.fromkeys(values))
    if product.options:
        group, choices = next(iter(product.options.items()))
        chosen = session.click(choices[-1].upper()).view
        assert chosen.options == {group: choices[-1]}
        assert chosen.text == item.text  # WebShop's simple text mode does not mark the choice
    description = session.click("Description").view
    assert description.text.split(SEP) == [*expected[:4], product.description]
    assert description.clickables == ("back to search", "< prev")
    assert session.click("Buy Now").refused is not None
    again = session.click("< Prev").view
    assert again.page == "item" and again.options == (item.options if not product.options else chosen.options)
    features = session.click("features").view
    assert features.text.split(SEP)[4:] == list(product.bullet_points)
    session.click("< prev")
    reviews = session.click("Reviews").view.text.split(SEP)[4:]
    # As WebShop's template of AgentBench's time shows the reviews AgentBench's copy never loads:
    # nothing past the header, whatever the catalog holds.
    assert reviews == []
    session.click("< Prev")
    results = session.click("< Prev").view
    assert results.page == "results" and results.options == {}
    session.close()


def check_search_from_any_page(backend: ShopBackend, task: WebShopTask, catalog: Catalog) -> None:
    """WebShop's text env takes search[...] on any page: a results page, an item with options
    chosen (the search clears them), a sub page; only the finished purchase refuses it."""
    product = catalog.get(task.asin)
    assert product is not None
    session = backend.open_session(task.goal())
    first = session.search(product.title).view
    again = session.search("cotton t-shirt")
    assert again.refused is None and again.view.page == "results" and again.view.keywords == "cotton t-shirt"
    assert "Page 1 (Total results: 50)" in again.view.text
    session.search(product.title)
    session.click(product.asin)
    if product.options:
        group, choices = next(iter(product.options.items()))
        assert session.click(choices[0]).view.options == {group: choices[0]}
    session.click("Description")
    from_sub = session.search(product.title)
    assert from_sub.refused is None and from_sub.view.page == "results"
    assert from_sub.view.options == {} and from_sub.view.asin is None and from_sub.view.text == first.text
    session.click(product.asin)
    session.click("Buy Now")
    assert session.search("more").refused is not None  # the purchase is over
    session.close()


def check_reference_purchase(backend: ShopBackend, task: WebShopTask) -> None:
    session = backend.open_session(task.goal())
    for step in task.reference_solution:
        argument = str(step.arguments)
        result = session.search(argument) if step.tool == "search" else session.click(argument)
        assert result.refused is None, (step, result.refused)
    done = session.view
    assert done.page == "done" and done.reward == 1.0
    assert done.text == "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 1.0"
    assert done.clickables == () and done.reward_components is not None
    assert done.reward_components["r_type"] == 1.0 and done.reward_components["r_price"] is True
    assert session.click("Back to Search").refused is not None
    session.close()


def transcript(backend: ShopBackend, task: WebShopTask) -> list[tuple[str, str | None]]:
    """A fixed walk through the shop: every page text and refusal, to compare backends."""
    session = backend.open_session(task.goal())
    moves = [("search", "wireless earbuds noise cancelling"), ("click", "Next >"), ("click", "nonsense"),
             ("click", "< Prev"), ("search", "x"), ("click", "Back to Search"), *[
                 (s.tool, str(s.arguments)) for s in task.reference_solution[:-1]],
             ("click", "Features"), ("click", "< Prev"), ("click", "Buy Now")]
    out: list[tuple[str, str | None]] = [(session.view.text, None)]
    for verb, argument in moves:
        result = session.search(argument) if verb == "search" else session.click(argument)
        out.append((result.view.text + repr(result.view.clickables) + repr(result.view.options), result.refused))
    session.close()
    return out
