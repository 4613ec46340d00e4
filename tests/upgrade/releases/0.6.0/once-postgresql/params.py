SOURCES = [{'name': 'news', 'url': 'http://127.0.0.1:37353/feed.xml'}]
DB_URL = 'postgresql+psycopg://postgres@127.0.0.1:5432/parser_fixture_0f2cc202'
DB_TIMEOUT = 1
FLUSH_INTERVAL = 3600
POLL_INTERVAL = 2
