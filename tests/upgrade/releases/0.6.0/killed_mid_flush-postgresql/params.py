SOURCES = [{'name': 'news', 'url': 'http://127.0.0.1:39123/feed.xml'}]
DB_URL = 'postgresql+psycopg://postgres@127.0.0.1:5432/parser_fixture_40ac2976'
DB_TIMEOUT = 1
FLUSH_INTERVAL = 3
POLL_INTERVAL = 2
