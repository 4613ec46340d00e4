"""The pushed protocols put together: one listener on WEBHOOK_LISTEN, a webhook endpoint per webhook
source and a callback per WebSub subscription. webhook.py and websub.py each know their protocol and
the shared listener (parser/listener.py), never each other."""
from __future__ import annotations

import threading
from typing import Any

from .inbox import Inbox
from .listener import Listener
from .webhook import WebhookEndpoint
from .websub import WebSub


def open_listener(settings: Any, sources: list, inbox: Inbox, fetcher: Any, stop: threading.Event) -> Listener:
    """Start the listener for the webhook and websub sources; the WebSub subscriber starts with it."""
    host, port = settings.webhook_listen
    listener = Listener(host, port, max_bytes=settings.max_bytes)
    for source in sources:
        if source.protocol == "webhook":
            url = listener.base_url + source.push.path
            listener.add(source.push.path, WebhookEndpoint(source, inbox, url, listener.refusals))
    websub_sources = [s for s in sources if s.protocol == "websub"]
    if not websub_sources:
        return listener.start()
    kwargs = dict(fetcher=fetcher, inbox=inbox, refusals=listener.refusals,
                  callback_base=settings.websub_callback_base or listener.base_url, stop=stop)
    if getattr(settings, "shared", False):  # one subscription per source for the group
        from .shared_push import SharedWebSub
        websub = SharedWebSub(websub_sources, db_url=settings.db_url, **kwargs)
    else:
        websub = WebSub(websub_sources, **kwargs)
    for path, endpoint in websub.endpoints().items():
        listener.add(path, endpoint)
    listener.on_close(websub.close)
    listener.start()
    websub.start()
    return listener
