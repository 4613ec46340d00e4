"""The pushed protocols put together: one listener on WEBHOOK_LISTEN, a webhook endpoint per webhook
source and a callback per WebSub subscription. webhook.py and websub.py each know their protocol and
the shared listener (parser/push/listener.py), never each other."""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from ..fetch.http import Fetcher
from ..pipeline.inbox import Inbox
from ..sources.protocols import protocol_of
from ..sources.source_options import PushedSource, push_of
from .listener import Listener
from .webhook import WebhookEndpoint
from .websub import WebSub


class ListenerSettings(Protocol):
    """What open_listener reads of the settings (parser/settings/params.py's Settings, a floor above)."""

    @property
    def webhook_listen(self) -> tuple[str, int]: ...

    @property
    def max_bytes(self) -> int: ...

    @property
    def websub_callback_base(self) -> str: ...


def open_listener(settings: ListenerSettings, sources: Sequence[PushedSource], inbox: Inbox, fetcher: Fetcher,
                  stop: threading.Event,
                  subscriber: Callable[..., WebSub] | None = None) -> Listener:
    """Start the listener for the pushed sources, each as its protocol's row says: a source posted to
    has its endpoint at its path; those pushed by a hub have the WebSub subscriber, started with it.
    `subscriber` builds that subscriber in place of WebSub: with SHARED the group's, one subscription
    per source (parser/group/shared_push.py, a floor above this one: chosen by the daemon, passed in)."""
    host, port = settings.webhook_listen
    listener = Listener(host, port, max_bytes=settings.max_bytes)
    pushed = [s for s in sources if protocol_of(s).pushed]
    for source in pushed:
        if not protocol_of(source).subscribed:
            url = listener.base_url + push_of(source).path
            listener.add(push_of(source).path, WebhookEndpoint(source, inbox, url, listener.refusals))
    websub_sources = [s for s in pushed if protocol_of(s).subscribed]
    if not websub_sources:
        return listener.start()
    websub = (subscriber or WebSub)(websub_sources, fetcher=fetcher, inbox=inbox, refusals=listener.refusals,
                                    callback_base=settings.websub_callback_base or listener.base_url, stop=stop)
    for path, endpoint in websub.endpoints().items():
        listener.add(path, endpoint)
    listener.on_close(websub.close)
    listener.start()
    websub.start()
    return listener
