"""The shop's catalog: products as WebShop models them, generated deterministically or loaded.

A :class:`Product` carries WebShop's fields: ``asin``, ``Title`` (``title``), ``category``
(one of the five top categories), ``query``, ``product_category`` (a breadcrumb joined by
`` › ``), ``BulletPoints``, ``Description``, ``Attributes``, ``options`` (option group ->
values), a price and a rating with reviews.

:class:`GeneratedCatalog` makes product ``i`` from ``(seed, i)`` alone, so a catalog of any
size costs no memory until a product is looked at and no time until it is indexed; its
ASINs encode the index (an invertible affine map written in base 36, ``B0`` + 8
characters like real ASINs). :class:`ListCatalog` holds products read from files
(WebShop's own, see ``domains/webshop/loader.py``).

Every catalog has a ``key``, a content hash: the generator's source, taxonomy, seed and
size, or the files' bytes. Caches (the search index) are stored under that key, so a
changed generator or catalog never reuses a stale index.
"""

from __future__ import annotations

import functools
import hashlib
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentunit_gym.backends.shop import taxonomy
from agentunit_gym.backends.shop.taxonomy import TYPES, ProductType
from agentunit_gym.errors import ConfigError

GENERATOR_VERSION = "1"
"""Bump with any change to how products are generated (also covered by the source hash)."""

DEFAULT_SIZE = 100_000
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Review:
    title: str
    score: int
    body: str


@dataclass(frozen=True)
class Product:
    """One product, with WebShop's fields."""

    asin: str
    title: str
    category: str
    query: str
    product_category: str
    price: float
    bullet_points: tuple[str, ...]
    description: str
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]] = field(hash=False)
    rating: float | None = None
    reviews: tuple[Review, ...] = ()
    price_range: tuple[float, float] | None = None
    """WebShop's two-price tags (``$a to $b``); the price used for the reward is ``price``."""

    @property
    def price_tag(self) -> str:
        """The price as the pages show it."""
        if self.price_range is not None:
            return f"${self.price_range[0]:.2f} to ${self.price_range[1]:.2f}"
        return f"${self.price:.2f}"

    @property
    def rating_text(self) -> str:
        return "N.A." if self.rating is None else f"{self.rating:.1f}"

    def search_text(self) -> str:
        """What the search index sees of this product: WebShop's indexed fields, lowercased.

        The title, the description, the first bullet point and the options written as
        ``name: v1, v2, and name: v1`` (WebShop's ``search_engine`` documents).
        """
        options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in self.options.items())
        first_bullet = self.bullet_points[0] if self.bullet_points else ""
        return " ".join((self.title, self.description, first_bullet, options)).lower()


class Catalog(ABC):
    """A set of products addressed by position and by ASIN."""

    @property
    @abstractmethod
    def key(self) -> str:
        """Content hash naming caches of this catalog."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def product(self, index: int) -> Product:
        """The product at ``index`` (0 <= index < len)."""

    @abstractmethod
    def index_of(self, asin: str) -> int | None:
        """The position of ``asin`` (case-insensitive), None when it is not in the catalog."""

    def get(self, asin: str) -> Product | None:
        index = self.index_of(asin)
        return None if index is None else self.product(index)

    def __iter__(self) -> Iterator[Product]:
        for index in range(len(self)):
            yield self.product(index)


# ------------------------------------------------------------------ ASINs

_ASIN_SPACE = 36**8
_ASIN_MUL = 1_000_000_007  # prime, so coprime with 36: the map is a bijection on the space
_ASIN_ADD = 0x2F1C3A5B7
_ASIN_INV = pow(_ASIN_MUL, -1, _ASIN_SPACE)
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def asin_of(index: int) -> str:
    """The ASIN of generated product ``index``: ``B0`` + 8 base-36 characters."""
    value = (index * _ASIN_MUL + _ASIN_ADD) % _ASIN_SPACE
    chars = []
    for _ in range(8):
        value, digit = divmod(value, 36)
        chars.append(_DIGITS[digit])
    return "B0" + "".join(reversed(chars))


def index_of_asin(asin: str) -> int | None:
    """Invert :func:`asin_of`; None for text that is not such an ASIN."""
    text = asin.strip().upper()
    if len(text) != 10 or not text.startswith("B0"):
        return None
    value = 0
    for char in text[2:]:
        digit = _DIGITS.find(char)
        if digit < 0:
            return None
        value = value * 36 + digit
    return ((value - _ASIN_ADD) * _ASIN_INV) % _ASIN_SPACE


# -------------------------------------------------------------- generation


def _source_hash() -> str:
    digest = hashlib.sha256(GENERATOR_VERSION.encode())
    for module_file in (Path(__file__), Path(taxonomy.__file__)):
        digest.update(module_file.read_bytes())
    return digest.hexdigest()


def _brand(rng: random.Random) -> str:
    syllables = taxonomy.BRAND_SYLLABLES
    name = rng.choice(syllables) + rng.choice(syllables) + rng.choice(taxonomy.BRAND_ENDINGS)
    return name.capitalize()


def _title_case(text: str) -> str:
    return " ".join(w if any(c.isdigit() for c in w) else w[:1].upper() + w[1:] for w in text.split())


def _pick(rng: random.Random, pool: Sequence[str], low: int, high: int) -> tuple[str, ...]:
    """``low``..``high`` items of ``pool``, in the pool's order."""
    count = min(len(pool), rng.randint(low, high))
    chosen = set(rng.sample(range(len(pool)), count))
    return tuple(item for i, item in enumerate(pool) if i in chosen)


def generate_product(seed: int, index: int) -> Product:
    """Product ``index`` of the catalog seeded ``seed`` (pure: same inputs, same product)."""
    rng = random.Random(seed * 1_000_003 + index)
    kind: ProductType = TYPES[rng.randrange(len(TYPES))]
    brand = _brand(rng)
    qualifier = rng.choice(kind.qualifiers) if kind.qualifiers else ""
    attributes = _pick(rng, kind.attributes, 2, 4)
    options: dict[str, tuple[str, ...]] = {}
    for group, values in kind.options.items():
        if rng.random() < 0.12:
            continue  # some listings have no choice in this group
        options[group] = _pick(rng, values, 2, min(len(values), 6))
    in_title = attributes[: rng.randint(1, 2)]
    extra = rng.choice(kind.extras) if kind.extras else ""
    title = f"{brand} {_title_case(qualifier)} {_title_case(kind.name)}"
    if extra:
        title += f" {_title_case(extra)}"
    title += ", " + ", ".join(_title_case(a) for a in in_title)
    low, high = kind.price
    price = round(rng.uniform(low, high), 2)
    use = rng.choice(kind.uses) if kind.uses else "everyday use"
    bullets = [f"{_title_case(a).upper()}: {_bullet(rng, kind, a)}" for a in attributes]
    bullets.append(f"GREAT FOR {use.upper()}: a {qualifier} {kind.name} made for {use}.".replace("  ", " "))
    if options:
        first_group = next(iter(options))
        bullets.append(f"CHOOSE YOUR {first_group.upper()}: available in {len(options[first_group])} options.")
    description = (
        f"The {brand} {qualifier} {kind.name} is built for {use}. "
        f"It is {', '.join(attributes[:-1]) + ' and ' + attributes[-1] if len(attributes) > 1 else attributes[0]}. "
        f"{brand} stands behind every {kind.name} with a 30-day return window."
    ).replace("  ", " ")
    reviews: list[Review] = []
    rating: float | None = None
    if rng.random() < 0.75:
        for _ in range(rng.randint(1, 3)):
            score, review_title = rng.choice(taxonomy.REVIEW_TITLES)
            body = rng.choice(taxonomy.REVIEW_BODIES).format(type=kind.name, use=use, attr=rng.choice(attributes))
            reviews.append(Review(review_title, score, body))
        rating = round(sum(r.score for r in reviews) / len(reviews), 1)
    return Product(
        asin=asin_of(index),
        title=" ".join(title.split()),
        category=kind.category,
        query=kind.query,
        product_category=" › ".join(kind.breadcrumb),
        price=price,
        bullet_points=tuple(bullets),
        description=description,
        attributes=attributes,
        options=options,
        rating=rating,
        reviews=tuple(reviews),
    )


_BULLET_TEMPLATES = (
    "{attr} for comfort and peace of mind, so your {type} keeps up with {use}.",
    "designed with {attr} in mind; a {type} you can rely on for {use}.",
    "{attr}, tested by our team before every batch ships.",
)


def _bullet(rng: random.Random, kind: ProductType, attribute: str) -> str:
    use = rng.choice(kind.uses) if kind.uses else "everyday use"
    return rng.choice(_BULLET_TEMPLATES).format(attr=attribute, type=kind.name, use=use)


class GeneratedCatalog(Catalog):
    """A seeded catalog of ``size`` products generated on demand.

    Args:
        size: number of products (at least 1).
        seed: the generator seed; the same seed and size give the same catalog everywhere.
    """

    def __init__(self, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED) -> None:
        if size < 1:
            raise ConfigError(f"catalog size must be at least 1, got {size}.")
        self.size = int(size)
        self.seed = int(seed)
        self._key = hashlib.sha256(f"{_source_hash()}:{self.seed}:{self.size}".encode()).hexdigest()[:20]
        self._cached = functools.lru_cache(maxsize=4096)(self._make)

    @property
    def key(self) -> str:
        return f"gen-{self._key}"

    def __len__(self) -> int:
        return self.size

    def _make(self, index: int) -> Product:
        return generate_product(self.seed, index)

    def product(self, index: int) -> Product:
        if not 0 <= index < self.size:
            raise IndexError(f"product index {index} out of range 0..{self.size - 1}")
        return self._cached(index)

    def index_of(self, asin: str) -> int | None:
        index = index_of_asin(asin)
        return index if index is not None and index < self.size else None


class ListCatalog(Catalog):
    """Products held in memory (read from files)."""

    def __init__(self, products: Sequence[Product], key: str) -> None:
        if not products:
            raise ConfigError("a catalog needs at least one product.")
        self._products = list(products)
        self._by_asin = {p.asin.upper(): i for i, p in enumerate(self._products)}
        self._key = key

    @property
    def key(self) -> str:
        return self._key

    def __len__(self) -> int:
        return len(self._products)

    def product(self, index: int) -> Product:
        return self._products[index]

    def index_of(self, asin: str) -> int | None:
        return self._by_asin.get(asin.strip().upper())
