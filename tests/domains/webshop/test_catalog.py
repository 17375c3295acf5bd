"""The generated catalog: deterministic, lazily made, the five categories, ASINs that round-trip."""

from __future__ import annotations

from collections import Counter

from agentunit_gym.backends.shop.catalog import GeneratedCatalog, asin_of, generate_product, index_of_asin
from agentunit_gym.backends.shop.taxonomy import CATEGORIES, TYPES


def test_same_seed_same_product_other_seed_other_product() -> None:
    assert generate_product(0, 123) == generate_product(0, 123)
    assert generate_product(0, 123) != generate_product(1, 123)
    assert GeneratedCatalog(100, 5).product(7) == GeneratedCatalog(5000, 5).product(7)


def test_asins_round_trip_and_are_unique() -> None:
    asins = [asin_of(i) for i in range(20_000)]
    assert len(set(asins)) == len(asins)
    assert all(len(a) == 10 and a.startswith("B0") and a == a.upper() for a in asins)
    assert all(index_of_asin(a) == i for i, a in enumerate(asins[:2000]))
    assert index_of_asin(asins[5].lower()) == 5
    assert index_of_asin("not-an-asin") is None
    assert index_of_asin("B0!!!!!!!!") is None


def test_index_of_respects_the_catalog_size() -> None:
    catalog = GeneratedCatalog(1000, 0)
    assert catalog.index_of(asin_of(999)) == 999
    assert catalog.index_of(asin_of(1000)) is None
    assert catalog.get(asin_of(3)) == catalog.product(3)


def test_a_100k_catalog_costs_nothing_until_read() -> None:
    catalog = GeneratedCatalog()
    assert len(catalog) == 100_000
    last = catalog.product(99_999)
    assert catalog.index_of(last.asin) == 99_999


def test_key_is_a_content_hash_of_seed_and_size() -> None:
    assert GeneratedCatalog(100, 1).key == GeneratedCatalog(100, 1).key
    assert len({GeneratedCatalog(100, 1).key, GeneratedCatalog(100, 2).key, GeneratedCatalog(101, 1).key}) == 3


def test_products_follow_the_taxonomy() -> None:
    catalog = GeneratedCatalog(2000, 3)
    by_query = {t.query: t for t in TYPES}
    categories: Counter[str] = Counter()
    for product in catalog:
        kind = by_query[product.query]
        categories[product.category] += 1
        assert product.category == kind.category
        assert set(product.attributes) <= set(kind.attributes) and 2 <= len(product.attributes) <= 4
        assert kind.price[0] <= product.price <= kind.price[1]
        for group, values in product.options.items():
            assert set(values) <= set(kind.options[group]) and len(values) >= 2
            assert all(v == v.lower() for v in values)
        assert kind.name.lower().split()[0] in product.title.lower()
        assert product.bullet_points and product.description
        assert product.product_category == " › ".join(kind.breadcrumb)
    assert set(categories) == set(CATEGORIES)
    assert min(categories.values()) > 200  # every top category is well represented
