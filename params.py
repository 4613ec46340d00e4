"""Settings of this project: the example a new project starts from. Every setting: docs/settings.md.

UPPERCASE names are settings; anything else (lowercase) is yours to use as a helper.
"""

DB_URL = "sqlite:///db/items.db"      # any SQLAlchemy URL; postgresql://user@host/db uses psycopg 3
STAGING_DIR = "staging"
LOG_DIR = "logs"

POLL_INTERVAL = 600                   # seconds between polls of a source (a source may set its own)
FLUSH_INTERVAL = 300                  # seconds between loads of the staging CSV into the database

UNIQUE_FIELDS = "auto"                # "auto": an entry's link, else its guid or content (docs/identity.md)
DEDUP = "hashfile"                    # "hashfile", "bloom" or "off"

SOURCES = [
    # Bundled with the repo, so a first run stores rows even without a network.
    {"name": "example", "url": "examples/example-feed.xml", "tags": ["example"]},
    {"name": "python-insider", "url": "https://blog.python.org/feeds/posts/default", "tags": ["python"]},
    {"name": "lwn", "url": "https://lwn.net/headlines/rss", "interval": 1800, "tags": ["linux"]},
    {"name": "hacker-news", "url": "https://hnrss.org/frontpage", "max_items": 30},
    {"name": "xkcd", "url": "https://xkcd.com/atom.xml", "interval": 3600},
]

# More kinds of sources (docs/protocols.md), for example:
#   {"name": "notices", "protocol": "json_api", "url": "https://api.example.org/v2/notices",
#    "items": "data.posts", "map": {"title": "headline", "published": "created_ms"},
#    "auth": {"type": "bearer", "token_env": "NOTICES_TOKEN"}},
#   {"name": "shop-hook", "protocol": "webhook", "path": "/hooks/shop", "secret_env": "SHOP_HOOK_SECRET"},
# SOURCES_OPML = "feeds.opml"        # a feed reader's export: each outline becomes a source

# Two-pass jobs (docs/jobs.md): sites where every object has its own address.
LINK_JOBS = [
    # {"name": "books", "objects": r"/catalogue/[^/]+_\d+/index\.html$",
    #  "harvest": {"root": "https://books.toscrape.com/", "depth": 3, "follow": r"/category/|page-\d+\.html$"},
    #  "fields": {"title": "//div[contains(@class, 'product_main')]/h1", "price": "css:p.price_color::text"},
    #  "delay": 1},
]
