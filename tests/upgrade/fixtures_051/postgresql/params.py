SOURCES = [{'name': 'news', 'url': 'http://127.0.0.1:35969/feed.xml'}]
LINK_JOBS = [{'fields': {'name': "//h1[@class='name']/text()", 'price': 'css:span.price::text'},
  'harvest': {'depth': 3, 'follow': '/list/', 'root': 'http://127.0.0.1:35969/'},
  'name': 'shop',
  'objects': '/item/\\d+$'}]
DB_URL = 'postgresql+psycopg://postgres@127.0.0.1:5432/parser_fixture_6e8a23fe'
DB_TIMEOUT = 1
