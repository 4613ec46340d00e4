"""The webhook protocol: senders POST JSON at a source's `path` on the shared listener
(parser/push/listener.py, which enforces the connection, time and size limits).

A delivery is taken only when its X-Hub-Signature-256 (`sha256=<hex>`, an HMAC-SHA256 of the body
with the secret in the source's `secret_env`) matches, compared in constant time; otherwise 401 and
a line in errors.log (summarised while they go on). A request without a well-formed signature header
is refused before its body is read. A delivery id seen before (X-Hub-Delivery, or the source's
`delivery_header`) is answered 200 and not taken again. Accepted records are written to the durable
inbox (parser/pipeline/inbox.py) before the 2xx answer; the main loop stages them. A delivery is taken whole
or refused: JSON that does not parse or nests deeper than MAX_JSON_DEPTH gets 400, a failure to store
it 503, so the sender keeps it and sends it again.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from email.message import Message
from urllib.parse import parse_qs

from ..core.errors import ParseError
from ..fetch.http import human_size
from ..pipeline.inbox import Inbox
from ..sources.source_options import PushedSource, push_of
from .delivery import Arrival, Desk, take
from .listener import RefusalLog, Reply, signature_matches

log = logging.getLogger("parser")
SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_DELIVERY_ID = 200  # longer ids are remembered by the SHA-256 of the whole id
_SIGNATURE_FORM = re.compile(r"sha256=[0-9a-fA-F]{64}")


def delivery_key(delivery: str) -> str:
    """What deliveries.txt remembers of an id: the id itself up to MAX_DELIVERY_ID characters (readable,
    and what earlier versions wrote), else 'sha256:' and the digest of the whole id, so two long ids
    sharing a prefix never collide and a huge id costs no more than a short one."""
    if len(delivery) <= MAX_DELIVERY_ID:
        return delivery
    return "sha256:" + hashlib.sha256(delivery.encode("utf-8", "surrogatepass")).hexdigest()


class WebhookEndpoint:
    methods: tuple[str, ...] = ("POST",)

    def __init__(self, source: PushedSource, inbox: Inbox, url: str, refusals: RefusalLog,
                 clock: Callable[[], float] = time.time):
        self.source = source
        self.name = source.name
        self.inbox = inbox
        self.url = url
        self.refusals = refusals
        self.clock = clock
        self.secret = push_of(source).secret()

    def too_large(self, length: int, limit: int, peer: str) -> None:
        self.refusals.note(self.name, self.url, "413", f"webhook delivery from {peer} refused (413): body of "
                           f"{human_size(length)} is over MAX_BYTES ({human_size(limit)})")

    def precheck(self, method: str, headers: Message, peer: str) -> Reply | None:
        """Before the body is read: without a signature of the right form there is nothing to check."""
        signature = (headers.get(SIGNATURE_HEADER) or "").strip()
        if not signature:
            return self._refuse(peer, f"no {SIGNATURE_HEADER} header")
        if not _SIGNATURE_FORM.fullmatch(signature):
            return self._refuse(peer, f"{SIGNATURE_HEADER} is not sha256=<64 hex digits>")
        return None

    def handle(self, method: str, query: Mapping[str, list[str]], headers: Message, body: bytes,
               peer: str) -> Reply:
        name, push = self.name, push_of(self.source)
        early = self.precheck(method, headers, peer)
        if early is not None:
            return early
        if not signature_matches(self.secret, body, headers.get(SIGNATURE_HEADER)):
            return self._refuse(peer, f"{SIGNATURE_HEADER} does not match the body signed with the secret in "
                                f"{push.secret_env}")
        delivery = (headers.get(push.delivery_header) or "").strip()
        key = delivery_key(delivery) if delivery else None
        shown = delivery[:80] + ("..." if len(delivery) > 80 else "") if delivery else "(no id)"
        if key and self.inbox.seen(name, key):
            return self._repeated(shown)
        what = f"webhook delivery {shown}"
        try:
            payload = _payload(body, headers.get("Content-Type", ""))
        except ParseError as exc:
            self.refusals.note(name, self.url, "400", f"{what} from {peer} refused (400): {exc}")
            return Reply(400, f"{exc}\n")
        taken = take(self.source, payload, Arrival("application/json", self.url, key, what, peer),
                     Desk(self.inbox, self.refusals, self.clock))
        if taken.refusal is not None:
            return taken.refusal
        parsed = taken.parsed
        if parsed is None:
            return self._repeated(shown)
        log.info("%s  delivery %s: %d records received", name, shown, len(parsed.records))
        return Reply(202, json.dumps({"accepted": len(parsed.records)}) + "\n", "application/json")

    def _refuse(self, peer: str, why: str) -> Reply:
        self.refusals.note(self.name, self.url, "401", f"webhook delivery from {peer} refused (401): {why}")
        return Reply(401, f"signature required: {why}\n")

    def _repeated(self, shown: str) -> Reply:
        log.info("%s  delivery %s repeated: already received, not taken again", self.name, shown)
        return Reply(200, "repeated delivery: already received\n")


def _payload(body: bytes, content_type: str) -> bytes:
    """The JSON of a delivery; form-encoded senders (GitHub's other option) put it in `payload`."""
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        values = parse_qs(body.decode("utf-8", "replace")).get("payload")
        if not values:
            raise ParseError("form-encoded delivery without a payload field")
        return values[0].encode("utf-8")
    return body


