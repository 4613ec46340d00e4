SOURCES = [{'name': 'news', 'url': 'http://127.0.0.1:43343/feed.xml'}]
DB_URL = 'sqlite:///db/items.db'
DB_TIMEOUT = 1
FLUSH_INTERVAL = 3600
POLL_INTERVAL = 2
