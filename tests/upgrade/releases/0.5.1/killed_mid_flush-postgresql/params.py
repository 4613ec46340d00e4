SOURCES = [{'name': 'news', 'url': 'http://127.0.0.1:37021/feed.xml'}]
DB_URL = 'postgresql+psycopg://postgres@127.0.0.1:5432/parser_fixture_1ab753fe'
DB_TIMEOUT = 1
FLUSH_INTERVAL = 3
POLL_INTERVAL = 2
