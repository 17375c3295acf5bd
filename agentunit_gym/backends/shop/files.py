"""Catalogs read from WebShop's own product files (``items_shuffle*.json`` and companions).

A WebShop data folder (``WebShop/data``) holds:

- ``items_shuffle.json`` (or ``items_shuffle_1000.json``): a JSON list of products with
  ``asin``, ``name``, ``full_description``, ``small_description`` (a list or a string),
  ``pricing`` (``"$12.99"`` or two prices), ``customization_options`` (group -> list of
  ``{"value", "image"}``, or null), ``category``, ``query``, ``product_category``.
- ``items_ins_v2.json`` (or ``items_ins_v2_1000.json``): ASIN -> ``{"attributes": [...], ...}``.
- ``reviews.json`` (optional): a list of ``{"asin", "reviews": [...], "average_rating"}``.

Products are cleaned as WebShop's ``load_products`` does: ASINs ``nan`` or longer than 10
characters and repeated ASINs are skipped, option groups lowercased, option values
stripped, lowercased and with ``/`` written `` | ``, a missing price is $100.0, products
without attributes get ``DUMMY_ATTR``. WebShop draws the price of a product listed with two
prices without a seed; we draw it from a generator seeded by the ASIN. The catalog key is a
hash of the files' bytes.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import Any

from agentunit_gym.backends.shop.catalog import Catalog, ListCatalog, Product, Review
from agentunit_gym.errors import TaskFileError

_PRODUCT_FILES = ("items_shuffle.json", "items_shuffle_1000.json")
_ATTRIBUTE_FILES = ("items_ins_v2.json", "items_ins_v2_1000.json")
REVIEW_FILE = "reviews.json"


def _first(folder: Path, names: tuple[str, ...]) -> Path | None:
    return next((folder / n for n in names if (folder / n).is_file()), None)


def read_json(path: Path, digest: Any) -> Any:
    """A JSON file's content, its name and bytes fed to ``digest``; a :class:`TaskFileError` naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TaskFileError(str(path), f"cannot read the file ({exc}).") from exc
    digest.update(path.name.encode() + b"\0" + raw)
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskFileError(str(path), f"not valid JSON: {exc}") from exc


def _prices(text: Any, asin: str) -> tuple[float, tuple[float, float] | None]:
    values = [float(v) for v in (re.sub(r"[^\d.]", "", part) for part in str(text or "").split("$")[1:]) if v
              and v.count(".") <= 1]
    if not values:
        return 100.0, None
    if len(values) == 1:
        return values[0], None
    low, high = values[0], values[1]
    return round(random.Random(asin).uniform(low, high), 2), (low, high)


def _product(item: dict[str, Any], attributes: dict[str, Any], reviews: dict[str, Any]) -> Product:
    asin = str(item["asin"])
    options: dict[str, tuple[str, ...]] = {}
    for group, contents in (item.get("customization_options") or {}).items():
        if contents is None:
            continue
        options[str(group).lower()] = tuple(str(c["value"]).strip().replace("/", " | ").lower() for c in contents)
    price, price_range = _prices(item.get("pricing"), asin)
    bullets = item.get("small_description")
    bullet_points = tuple(str(b) for b in bullets) if isinstance(bullets, list) else (str(bullets or ""),)
    found = attributes.get(asin) or {}
    review_entry = reviews.get(asin) or {}
    parsed_reviews = tuple(
        Review(str(r.get("title", "")), int(float(r.get("score", r.get("stars", 0)) or 0)),
               str(r.get("body", r.get("review", ""))))
        for r in review_entry.get("reviews", []) or []
    )
    rating = review_entry.get("average_rating")
    return Product(
        asin=asin,
        title=str(item.get("name", "")),
        category=str(item.get("category", "")),
        query=str(item.get("query", "")).lower().strip(),
        product_category=str(item.get("product_category", "")),
        price=price,
        bullet_points=bullet_points,
        description=str(item.get("full_description", "") or ""),
        attributes=tuple(found.get("attributes") or ("DUMMY_ATTR",)),
        options=options,
        rating=float(rating) if isinstance(rating, (int, float)) else None,
        reviews=parsed_reviews,
        price_range=price_range,
    )


def load_webshop_catalog(folder: str | Path) -> Catalog:
    """The products of a WebShop data folder.

    Raises:
        TaskFileError: no product file, or a file that is not valid JSON or lacks fields.
    """
    root = Path(folder)
    products_path = _first(root, _PRODUCT_FILES)
    if products_path is None:
        raise TaskFileError(str(root), f"no WebShop product file ({' or '.join(_PRODUCT_FILES)}) in this folder.")
    digest = hashlib.sha256(b"webshop-files\0")
    items = read_json(products_path, digest)
    attributes_path = _first(root, _ATTRIBUTE_FILES)
    attributes = read_json(attributes_path, digest) if attributes_path is not None else {}
    reviews: dict[str, Any] = {}
    if (root / REVIEW_FILE).is_file():
        reviews = {str(r["asin"]): r for r in read_json(root / REVIEW_FILE, digest) if isinstance(r, dict)}
    if not isinstance(items, list):
        raise TaskFileError(str(products_path), "expected a JSON list of products.")
    products: list[Product] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict) or "asin" not in item:
            raise TaskFileError(str(products_path), f"item {index} is not a product with an 'asin'.")
        asin = str(item["asin"])
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        try:
            products.append(_product(item, attributes, reviews))
        except (KeyError, TypeError, ValueError) as exc:
            raise TaskFileError(str(products_path), f"product {asin!r} cannot be read: {exc}") from exc
    return ListCatalog(products, f"webshop-{digest.hexdigest()[:20]}")
