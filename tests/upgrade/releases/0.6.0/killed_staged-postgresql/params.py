SOURCES = [{'name': 'news', 'url': 'http://127.0.0.1:46343/feed.xml'}]
DB_URL = 'postgresql+psycopg://postgres@127.0.0.1:5432/parser_fixture_35aab5f6'
DB_TIMEOUT = 1
FLUSH_INTERVAL = 3600
POLL_INTERVAL = 2
