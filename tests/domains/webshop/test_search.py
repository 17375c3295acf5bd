"""The BM25 index: built once and saved under the catalog key, loaded memory-mapped, deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentunit_gym.backends.shop.catalog import GeneratedCatalog
from agentunit_gym.backends.shop.search import SEARCH_RETURN_N, SearchIndex, tokenize


def test_tokenize_lowercases_and_drops_stopwords() -> None:
    assert tokenize("The Red T-Shirt for a Man, 2-Pack") == ["red", "shirt", "man", "pack"]


def test_built_once_then_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = GeneratedCatalog(300, 4)
    first = SearchIndex.open(catalog, root=tmp_path)
    folder = SearchIndex.directory(catalog, tmp_path)
    assert (folder / "params.index.json").is_file()
    assert catalog.key in str(folder)

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the saved index should have been loaded, not rebuilt")

    monkeypatch.setattr(SearchIndex, "build", classmethod(no_build))
    second = SearchIndex.open(catalog, root=tmp_path)
    query = catalog.product(17).title
    assert second.search(query) == first.search(query)


def test_the_exact_title_ranks_its_product_first(small_shop: object) -> None:
    from agentunit_gym.backends.shop.engine import Shop

    assert isinstance(small_shop, Shop)
    for index in (0, 5, 250, 2999):
        product = small_shop.catalog.product(index)
        hits = small_shop.index.search(product.title)
        assert product.title in [small_shop.catalog.product(h).title for h in hits[:3]]


def test_results_are_capped_matching_and_deterministic(small_shop: object) -> None:
    from agentunit_gym.backends.shop.engine import Shop

    assert isinstance(small_shop, Shop)
    hits = small_shop.index.search("cotton t-shirt")
    assert len(hits) == SEARCH_RETURN_N
    assert hits == small_shop.index.search("cotton t-shirt")
    for h in hits:
        text = small_shop.catalog.product(h).search_text().lower()
        assert "cotton" in text or "shirt" in text
    assert small_shop.index.search("qwertyuiop zxcvb") == []
    assert small_shop.index.search("the and of") == []
    assert len(small_shop.index.search("hdmi", k=5)) == 5


def test_the_index_holds_webshops_fields_with_lucenes_parameters(small_shop: object) -> None:
    from agentunit_gym.backends.shop.catalog import Product
    from agentunit_gym.backends.shop.engine import Shop
    from agentunit_gym.backends.shop.search import BM25_B, BM25_K1, INDEX_VERSION

    product = Product(asin="B0TEST0001", title="Acme Tee", category="fashion", query="men's t-shirts",
                      product_category="Clothing", price=9.0, bullet_points=("Soft knit.", "Second bullet."),
                      description="A Plain Shirt.", attributes=("machine wash",),
                      options={"size": ("small", "large"), "color": ("red",)})
    # Title, description, first bullet, options as WebShop writes them; not the query or the attributes.
    assert product.search_text() == "acme tee a plain shirt. soft knit. size: small, large, and color: red"
    assert isinstance(small_shop, Shop)
    assert small_shop.index.bm25_parameters == (BM25_K1, BM25_B, "lucene") == (1.2, 0.75, "lucene")
    assert SearchIndex.directory(small_shop.catalog).name == f"index-{INDEX_VERSION}"
    # A description word finds its product; an attribute alone (not indexed) does not rank it by itself.
    described = small_shop.catalog.product(7)
    word = max(tokenize(described.description), key=len)
    assert 7 in small_shop.index.search(f"{word} {described.title}")


def test_an_index_of_another_size_is_refused(tmp_path: Path) -> None:
    from agentunit_gym.errors import BackendError

    catalog = GeneratedCatalog(50, 1)
    SearchIndex.open(catalog, root=tmp_path)
    with pytest.raises(BackendError, match="delete that directory"):
        SearchIndex.load(SearchIndex.directory(catalog, tmp_path), 51)
