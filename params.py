"""Settings of this project: the example a new project starts from. See README.md, "Settings".

UPPERCASE names are settings; anything else (lowercase) is yours to use as a helper.
"""

DB_URL = "sqlite:///db/items.db"      # any SQLAlchemy URL; postgresql://user@host/db uses psycopg 3
STAGING_DIR = "staging"
LOG_DIR = "logs"

POLL_INTERVAL = 600                   # seconds between polls of a source (a source may set its own)
FLUSH_INTERVAL = 300                  # seconds between loads of the staging CSV into the database

UNIQUE_FIELDS = ["link"]              # a record is a duplicate when these fields hash alike
DEDUP = "hashfile"                    # "hashfile", "bloom" or "off"

SOURCES = [
    # Bundled with the repo, so a first run stores rows even without a network.
    {"name": "example", "url": "examples/example-feed.xml", "tags": ["example"]},
    {"name": "python-insider", "url": "https://blog.python.org/feeds/posts/default", "tags": ["python"]},
    {"name": "lwn", "url": "https://lwn.net/headlines/rss", "interval": 1800, "tags": ["linux"]},
    {"name": "hacker-news", "url": "https://hnrss.org/frontpage", "max_items": 30},
    {"name": "xkcd", "url": "https://xkcd.com/atom.xml", "interval": 3600},
]
