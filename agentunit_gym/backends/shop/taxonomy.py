"""The product taxonomy the catalog generator draws from: WebShop's five top categories.

WebShop's catalog (scraped from Amazon) has five top categories, ``beauty`` (makeup and
personal care), ``electronics``, ``fashion``, ``food`` and ``furniture``; each product
carries the search query it was scraped under (``query``), a breadcrumb
(``product_category``, parts joined by `` › ``), attributes (short lowercase phrases such
as ``machine wash`` or ``gluten free``), option groups (``size``, ``color``, ``flavor`` ...)
and a price. This module is the data the generator combines: per product type, the nouns
of its name, its query and breadcrumb, the attributes it may have, its option groups, a
price range, and phrases its bullet points and descriptions are written from.

Everything here is our own wording. Changing this file changes the catalog's content
hash, so cached catalogs and indexes are rebuilt and the bundled goals must be
regenerated (``python -m agentunit_gym.domains.webshop.goals``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProductType:
    """One kind of product (``t-shirt``, ``foundation`` ...) and the vocabulary to write it."""

    name: str
    """The type noun phrase used in titles (``t-shirt``)."""
    category: str
    """WebShop's top category: beauty, electronics, fashion, food or furniture."""
    query: str
    """The search query the product was 'scraped under' (WebShop's ``query`` field)."""
    breadcrumb: tuple[str, ...]
    """The ``product_category`` parts, top first."""
    attributes: tuple[str, ...]
    """Attribute phrases a product of this type may have."""
    options: dict[str, tuple[str, ...]]
    """Option groups and their possible values (lowercase, as WebShop stores them)."""
    price: tuple[float, float]
    """Price range in dollars."""
    qualifiers: tuple[str, ...] = ()
    """Words placed before the type in titles (``classic``, ``lightweight`` ...)."""
    uses: tuple[str, ...] = ()
    """Phrases for what the product is for, used in bullets and descriptions."""
    extras: tuple[str, ...] = field(default_factory=tuple)
    """Suffix phrases for titles (``pack of 2``, ``for men`` ...)."""


SIZES_CLOTHING = ("x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large")
SIZES_SHOES = tuple(f"{n}" for n in ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12", "13"))
COLORS_FASHION = ("black", "white", "navy blue", "heather grey", "red", "olive green", "burgundy", "khaki",
                  "royal blue", "pink", "charcoal", "beige", "maroon", "teal", "mustard yellow", "lavender")
COLORS_HOME = ("walnut", "espresso", "white", "black", "natural oak", "grey", "navy", "cream", "teal",
               "charcoal", "light brown", "green")
COLORS_TECH = ("black", "white", "silver", "space gray", "blue", "rose gold", "red", "green")
SHADES = ("ivory", "porcelain", "natural beige", "sand", "warm honey", "golden tan", "caramel", "mocha",
          "espresso", "deep chestnut", "rose", "coral", "berry", "plum", "nude", "red")

TYPES: tuple[ProductType, ...] = (
    # ------------------------------------------------------------- fashion
    ProductType(
        "t-shirt", "fashion", "men's t-shirts",
        ("Clothing, Shoes & Jewelry", "Men", "Clothing", "Shirts", "T-Shirts"),
        ("machine wash", "cotton", "short sleeve", "crew neck", "slim fit", "relaxed fit", "tagless",
         "moisture wicking", "pre-shrunk", "organic cotton", "classic fit"),
        {"size": SIZES_CLOTHING, "color": COLORS_FASHION}, (7.99, 39.99),
        ("classic", "essential", "heavyweight", "soft", "everyday", "vintage wash", "performance"),
        ("the gym", "weekend errands", "layering under a jacket", "lounging at home"),
        ("for men", "2-pack", "3-pack", ""),
    ),
    ProductType(
        "dress", "fashion", "women's dresses",
        ("Clothing, Shoes & Jewelry", "Women", "Clothing", "Dresses"),
        ("machine wash", "polyester", "long sleeve", "v-neck", "a-line", "pockets", "floral print",
         "stretch fabric", "midi length", "hand wash only"),
        {"size": SIZES_CLOTHING, "color": COLORS_FASHION}, (19.99, 89.99),
        ("casual", "wrap", "summer", "elegant", "boho", "cocktail", "maxi"),
        ("weddings", "the office", "beach vacations", "date nights"),
        ("for women", ""),
    ),
    ProductType(
        "running shoes", "fashion", "men's running shoes",
        ("Clothing, Shoes & Jewelry", "Men", "Shoes", "Athletic", "Running"),
        ("rubber sole", "lace up", "breathable mesh", "memory foam", "non slip", "lightweight", "arch support",
         "wide toe box"),
        {"size": SIZES_SHOES, "color": COLORS_FASHION}, (29.99, 149.99),
        ("trail", "road", "cushioned", "responsive", "minimalist"),
        ("long runs", "gym workouts", "walking all day"),
        ("for men", ""),
    ),
    ProductType(
        "hoodie", "fashion", "women's hoodies",
        ("Clothing, Shoes & Jewelry", "Women", "Clothing", "Fashion Hoodies & Sweatshirts"),
        ("machine wash", "fleece lined", "drawstring closure", "kangaroo pocket", "long sleeve", "oversized fit",
         "cotton blend", "ribbed cuffs"),
        {"size": SIZES_CLOTHING, "color": COLORS_FASHION}, (19.99, 64.99),
        ("cozy", "cropped", "zip-up", "pullover", "lightweight"),
        ("cool evenings", "travel", "lounging at home"),
        ("for women", ""),
    ),
    ProductType(
        "jeans", "fashion", "men's jeans",
        ("Clothing, Shoes & Jewelry", "Men", "Clothing", "Jeans"),
        ("machine wash", "button closure", "straight leg", "stretch denim", "five pocket", "slim fit",
         "relaxed fit", "zipper fly"),
        {"size": ("28w x 30l", "30w x 30l", "32w x 30l", "32w x 32l", "34w x 32l", "36w x 32l", "38w x 34l"),
         "color": ("dark wash", "light wash", "black", "stonewash", "medium indigo", "grey")},
        (24.99, 79.99), ("original", "athletic", "tapered", "bootcut", "rigid"),
        ("work", "weekends", "everyday wear"), ("for men", ""),
    ),
    ProductType(
        "sandals", "fashion", "women's sandals",
        ("Clothing, Shoes & Jewelry", "Women", "Shoes", "Sandals"),
        ("open toe", "ankle strap", "rubber sole", "faux leather", "cushioned footbed", "non slip",
         "adjustable buckle"),
        {"size": SIZES_SHOES, "color": ("black", "tan", "white", "gold", "silver", "brown", "nude")},
        (14.99, 69.99), ("flat", "wedge", "strappy", "platform", "slide"),
        ("summer days", "the beach", "casual outings"), ("for women", ""),
    ),
    # -------------------------------------------------------------- beauty
    ProductType(
        "foundation", "beauty", "liquid foundation",
        ("Beauty & Personal Care", "Makeup", "Face", "Foundation"),
        ("long lasting", "oil free", "cruelty free", "paraben free", "full coverage", "matte finish",
         "spf 15", "vegan", "fragrance free", "dermatologist tested"),
        {"color": SHADES, "size": ("1 fl oz", "1.35 fl oz", "2 fl oz")}, (6.99, 48.0),
        ("weightless", "liquid", "luminous", "hydrating", "matte"),
        ("all-day wear", "oily skin", "sensitive skin"), ("",),
    ),
    ProductType(
        "lipstick", "beauty", "matte lipstick",
        ("Beauty & Personal Care", "Makeup", "Lips", "Lipstick"),
        ("long lasting", "cruelty free", "vegan", "matte finish", "moisturizing", "paraben free",
         "transfer proof", "vitamin e"),
        {"color": SHADES, "size": ("pack of 1", "pack of 2", "pack of 3")}, (4.99, 32.0),
        ("velvet", "creamy", "satin", "liquid", "bold"),
        ("everyday looks", "special occasions"), ("",),
    ),
    ProductType(
        "eyeshadow palette", "beauty", "eyeshadow palette",
        ("Beauty & Personal Care", "Makeup", "Eyes", "Eyeshadow"),
        ("highly pigmented", "cruelty free", "blendable", "long lasting", "shimmer", "matte finish",
         "talc free", "vegan"),
        {"color": ("nude", "smoky", "sunset", "rose gold", "jewel tones", "neutrals"),
         "size": ("9 shades", "12 shades", "18 shades", "35 shades")}, (7.99, 54.0),
        ("professional", "travel", "warm", "cool toned"), ("day and night looks", "beginners"), ("",),
    ),
    ProductType(
        "shampoo", "beauty", "sulfate free shampoo",
        ("Beauty & Personal Care", "Hair Care", "Shampoo & Conditioner", "Shampoos"),
        ("sulfate free", "paraben free", "natural ingredients", "color safe", "argan oil", "tea tree",
         "cruelty free", "for dry hair", "for curly hair"),
        {"size": ("8 fl oz", "12 fl oz", "16.9 fl oz", "33.8 fl oz"),
         "scent": ("unscented", "lavender", "coconut", "peppermint", "citrus", "eucalyptus")}, (5.99, 36.0),
        ("moisturizing", "clarifying", "volumizing", "repairing"), ("daily washing", "damaged hair"), ("",),
    ),
    ProductType(
        "face moisturizer", "beauty", "face moisturizer",
        ("Beauty & Personal Care", "Skin Care", "Face", "Creams & Moisturizers"),
        ("hyaluronic acid", "non comedogenic", "fragrance free", "spf 30", "cruelty free", "vitamin c",
         "oil free", "dermatologist tested", "for sensitive skin"),
        {"size": ("1.7 oz", "2.5 oz", "3.4 oz", "5 oz")}, (8.99, 58.0),
        ("daily", "overnight", "gel", "rich", "lightweight"), ("morning routines", "dry winter skin"), ("",),
    ),
    # --------------------------------------------------------- electronics
    ProductType(
        "wireless earbuds", "electronics", "wireless earbuds",
        ("Electronics", "Headphones, Earbuds & Accessories", "Earbuds"),
        ("noise cancelling", "bluetooth 5.3", "water resistant", "long battery life", "charging case",
         "built-in microphone", "touch control", "fast charging"),
        {"color": COLORS_TECH}, (15.99, 199.99), ("true wireless", "sport", "compact", "premium", "open-ear"),
        ("commuting", "workouts", "video calls"), ("",),
    ),
    ProductType(
        "phone case", "electronics", "iphone case",
        ("Electronics", "Cell Phones & Accessories", "Cases, Holsters & Sleeves", "Basic Cases"),
        ("shockproof", "slim fit", "wireless charging compatible", "raised edges", "clear back", "magnetic",
         "drop protection", "anti scratch"),
        {"size": ("iphone 13", "iphone 14", "iphone 14 pro", "iphone 15", "iphone 15 pro max", "galaxy s23"),
         "color": ("clear", "black", "blue", "pink", "green", "purple")}, (5.99, 39.99),
        ("rugged", "thin", "leather", "glitter", "heavy duty"), ("everyday protection", "drops"), ("",),
    ),
    ProductType(
        "hdmi cable", "electronics", "hdmi cable",
        ("Electronics", "Computers & Accessories", "Cables & Accessories", "Cables", "HDMI Cables"),
        ("4k", "high speed", "braided", "gold plated", "8k 60hz", "ethernet", "dolby vision"),
        {"size": ("3 ft", "6 ft", "10 ft", "15 ft", "25 ft"), "color": ("black", "grey", "white")},
        (5.99, 29.99), ("ultra", "flat", "premium", "slim"), ("gaming consoles", "home theater"), ("",),
    ),
    ProductType(
        "portable charger", "electronics", "portable charger power bank",
        ("Electronics", "Cell Phones & Accessories", "Chargers & Power Adapters", "Portable Power Banks"),
        ("fast charging", "usb c", "led display", "compact design", "dual output", "airline approved",
         "wireless charging"),
        {"size": ("5000mah", "10000mah", "20000mah", "26800mah"), "color": COLORS_TECH}, (12.99, 69.99),
        ("slim", "high capacity", "magnetic", "mini"), ("travel", "camping", "long days out"), ("",),
    ),
    ProductType(
        "bluetooth speaker", "electronics", "portable bluetooth speaker",
        ("Electronics", "Portable Audio & Video", "Portable Speakers & Docks", "Portable Bluetooth Speakers"),
        ("waterproof", "long battery life", "deep bass", "built-in microphone", "stereo pairing", "dustproof",
         "usb c charging"),
        {"color": COLORS_TECH}, (19.99, 149.99), ("rugged", "mini", "360 degree", "outdoor", "loud"),
        ("pool parties", "hiking", "the shower"), ("",),
    ),
    ProductType(
        "wireless mouse", "electronics", "wireless mouse",
        ("Electronics", "Computers & Accessories", "Computer Accessories & Peripherals", "Mice"),
        ("ergonomic", "silent click", "rechargeable", "usb receiver", "bluetooth", "adjustable dpi",
         "plug and play"),
        {"color": COLORS_TECH}, (8.99, 79.99), ("compact", "vertical", "gaming", "travel"),
        ("office work", "laptops", "long sessions"), ("",),
    ),
    # ----------------------------------------------------------- furniture
    ProductType(
        "office chair", "furniture", "ergonomic office chair",
        ("Home & Kitchen", "Furniture", "Home Office Furniture", "Home Office Chairs", "Desk Chairs"),
        ("lumbar support", "adjustable height", "breathable mesh", "easy assembly", "swivel", "padded armrests",
         "high back", "heavy duty"),
        {"color": ("black", "grey", "white", "blue", "pink")}, (59.99, 349.99),
        ("executive", "ergonomic", "mid-back", "task"), ("long work days", "home offices"), ("",),
    ),
    ProductType(
        "bookshelf", "furniture", "bookshelf",
        ("Home & Kitchen", "Furniture", "Living Room Furniture", "Bookcases"),
        ("easy assembly", "engineered wood", "metal frame", "5-tier", "industrial style", "anti-tip kit",
         "space saving"),
        {"color": COLORS_HOME}, (39.99, 229.99), ("tall", "ladder", "corner", "open", "rustic"),
        ("living rooms", "home offices", "kids' rooms"), ("",),
    ),
    ProductType(
        "coffee table", "furniture", "coffee table",
        ("Home & Kitchen", "Furniture", "Living Room Furniture", "Tables", "Coffee Tables"),
        ("easy assembly", "solid wood", "storage shelf", "lift top", "tempered glass", "mid century",
         "rounded corners"),
        {"color": COLORS_HOME}, (49.99, 299.99), ("round", "rectangular", "farmhouse", "modern"),
        ("living rooms", "small apartments"), ("",),
    ),
    ProductType(
        "bed frame", "furniture", "platform bed frame",
        ("Home & Kitchen", "Furniture", "Bedroom Furniture", "Beds, Frames & Bases", "Bed Frames"),
        ("no box spring needed", "easy assembly", "under bed storage", "metal slats", "noise free",
         "upholstered headboard", "solid wood"),
        {"size": ("twin", "full", "queen", "king"), "color": COLORS_HOME}, (89.99, 499.99),
        ("platform", "upholstered", "metal", "wooden", "low profile"), ("guest rooms", "master bedrooms"), ("",),
    ),
    ProductType(
        "nightstand", "furniture", "nightstand",
        ("Home & Kitchen", "Furniture", "Bedroom Furniture", "Nightstands"),
        ("easy assembly", "storage drawer", "charging station", "solid wood legs", "open shelf",
         "engineered wood"),
        {"color": COLORS_HOME, "size": ("set of 1", "set of 2")}, (29.99, 179.99),
        ("modern", "rustic", "small", "floating"), ("bedrooms", "dorm rooms"), ("",),
    ),
    # ---------------------------------------------------------------- food
    ProductType(
        "coffee beans", "food", "whole bean coffee",
        ("Grocery & Gourmet Food", "Beverages", "Coffee, Tea & Cocoa", "Coffee", "Whole Coffee Beans"),
        ("organic", "fair trade", "single origin", "medium roast", "dark roast", "kosher", "non gmo"),
        {"size": ("12 ounce (pack of 1)", "2 pound (pack of 1)", "12 ounce (pack of 2)"),
         "flavor": ("original", "french roast", "colombian", "espresso", "breakfast blend", "hazelnut")},
        (8.99, 44.99), ("artisan", "small batch", "bold", "smooth"), ("espresso machines", "french press"), ("",),
    ),
    ProductType(
        "protein bars", "food", "protein bars",
        ("Grocery & Gourmet Food", "Snack Foods", "Bars", "Protein Bars"),
        ("gluten free", "high protein", "low sugar", "non gmo", "keto friendly", "plant based",
         "no artificial sweeteners", "dairy free"),
        {"flavor": ("chocolate chip", "peanut butter", "cookies and cream", "birthday cake", "salted caramel",
                    "mint chocolate"),
         "size": ("12 count (pack of 1)", "24 count (pack of 1)", "12 count (pack of 2)")}, (12.99, 49.99),
        ("chewy", "crunchy", "whole food", "snack size"), ("post-workout snacks", "busy mornings"), ("",),
    ),
    ProductType(
        "herbal tea", "food", "herbal tea bags",
        ("Grocery & Gourmet Food", "Beverages", "Coffee, Tea & Cocoa", "Tea", "Herbal"),
        ("caffeine free", "organic", "non gmo", "kosher", "individually wrapped", "gluten free"),
        {"flavor": ("chamomile", "peppermint", "ginger", "lemon balm", "hibiscus", "rooibos"),
         "size": ("20 count (pack of 1)", "20 count (pack of 6)", "100 count (pack of 1)")}, (3.99, 29.99),
        ("calming", "soothing", "loose leaf", "wellness"), ("bedtime", "afternoon breaks"), ("",),
    ),
    ProductType(
        "mixed nuts", "food", "mixed nuts",
        ("Grocery & Gourmet Food", "Snack Foods", "Nuts & Seeds", "Mixed Nuts"),
        ("low sodium", "non gmo", "gluten free", "resealable bag", "kosher", "roasted", "unsalted"),
        {"size": ("10.3 ounce (pack of 1)", "1 pound (pack of 1)", "2.5 pound (pack of 1)"),
         "flavor": ("lightly salted", "unsalted", "honey roasted", "sea salt", "smoked")}, (5.99, 34.99),
        ("deluxe", "premium", "trail", "party"), ("road trips", "office snacking"), ("",),
    ),
    ProductType(
        "olive oil", "food", "extra virgin olive oil",
        ("Grocery & Gourmet Food", "Pantry Staples", "Cooking Oils", "Olive Oils"),
        ("cold pressed", "organic", "non gmo", "first cold press", "kosher", "glass bottle"),
        {"size": ("16.9 fl oz (pack of 1)", "25.3 fl oz (pack of 1)", "101.4 fl oz (pack of 1)")},
        (7.99, 49.99), ("extra virgin", "robust", "mild", "estate"), ("salad dressings", "everyday cooking"), ("",),
    ),
)

CATEGORIES: tuple[str, ...] = ("beauty", "electronics", "fashion", "food", "furniture")
"""WebShop's five top categories."""

BRAND_SYLLABLES: tuple[str, ...] = (
    "al", "ar", "bel", "bor", "cal", "cor", "da", "del", "el", "fen", "gal", "hal", "ka", "kel", "lu", "mar",
    "mo", "nor", "ol", "pa", "quin", "ra", "sol", "ta", "ter", "ul", "va", "ven", "wil", "zo", "tri", "bra",
)
BRAND_ENDINGS: tuple[str, ...] = ("", "a", "o", "ix", "on", "ly", "co", "ra", "en", "is")

REVIEW_TITLES: tuple[tuple[int, str], ...] = (
    (5, "Exactly what I wanted"), (5, "Love it"), (5, "Great value"), (4, "Pretty good overall"),
    (4, "Does the job"), (3, "It's okay"), (3, "Mixed feelings"), (2, "Not as described"),
    (1, "Disappointed"), (5, "Would buy again"), (4, "Nice quality for the price"),
)
REVIEW_BODIES: tuple[str, ...] = (
    "Arrived quickly and matches the description.",
    "The {type} works well for {use}; I have used it for a few weeks now.",
    "Quality is better than I expected at this price.",
    "Runs a little different from what I am used to, but I am keeping it.",
    "My second one of these. The {attr} part is what sold me.",
    "Packaging was damaged but the {type} itself was fine.",
    "Not great for {use}, otherwise okay.",
)
