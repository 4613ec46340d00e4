SOURCES = [{'name': 'news', 'url': 'http://127.0.0.1:41081/feed.xml'}]
LINK_JOBS = [{'fields': {'name': "//h1[@class='name']/text()", 'price': 'css:span.price::text'},
  'harvest': {'depth': 3, 'follow': '/list/', 'root': 'http://127.0.0.1:41081/'},
  'name': 'shop',
  'objects': '/item/\\d+$'}]
DB_URL = 'sqlite:///db/items.db'
DB_TIMEOUT = 1
