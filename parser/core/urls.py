"""Canonical URLs: one spelling per address, so the same item reached through two feeds hashes alike.

w3lib does the careful part (percent-encoding, IDNA hosts, sorted query, no fragment); it keeps
tracking and session parameters, which we remove first. courlan was the other candidate: without
`strict` it keeps session ids and fragments, with it it drops every parameter it does not know.
"""
from __future__ import annotations

import re
import unicodedata
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

# Dropped from a link's identity: only parameters that never name content. A parameter that can
# name it stays, since dropping it merges two entries into one and the second is never stored, while
# keeping a junk one costs at most a second row for an item two feeds link with different junk.
# - Analytics, each named by its vendor, the value a campaign or click id: utm_* (Google Analytics),
#   fbclid (Facebook), gclid/gclsrc/dclid (Google Ads, DoubleClick), yclid (Yandex), msclkid
#   (Microsoft Ads), mc_cid/mc_eid (Mailchimp), igshid (Instagram), _hsenc/_hsmi (HubSpot),
#   _openstat (Openstat), wt.mc_id (Webtrends), ref_src (Twitter's widgets).
# - Session ids of web frameworks, which name a visitor's session, never a page: sessionid,
#   session_id, jsessionid (Java servlets, also as the path parameter ;jsessionid=), phpsessid (PHP),
#   aspsessionid* (classic ASP), cfid/cftoken (ColdFusion).
# Kept although older versions dropped them (identity rules 2, parser/pipeline/identity.py RULES_VERSION):
# `ref` (`deal.php?ref=17`; a git branch in GitHub and GitLab links), `sid` (PHP-Nuke's story id,
# `modules.php?name=News&file=article&sid=123`, though phpBB's session id too), `referrer` and `spm`
# (Alibaba's tracking, but a plain word any site may use for its own content).
_TRACKING = re.compile(
    r"^(utm_.*|fbclid|gclid|gclsrc|dclid|yclid|msclkid|mc_cid|mc_eid|igshid|_hsenc|_hsmi|"
    r"ref_src|_openstat|wt\.mc_id)$", re.IGNORECASE)
_SESSION = re.compile(r"^(sessionid|session_id|jsessionid|phpsessid|aspsessionid.*|cfid|cftoken)$",
                      re.IGNORECASE)
_PATH_SESSION = re.compile(r";(jsessionid|phpsessid|sessionid)=[^/?#]*", re.IGNORECASE)
_DEFAULT_PORTS = {"http": 80, "https": 443}
# A URL already in canonical form: lower-case ASCII host without a port, a path of characters
# w3lib leaves as they are (no '%', no ';' parameters; dot segments are checked apart), at most one
# plain query parameter, no fragment. Most feed links are such; w3lib would give them back unchanged
# at 60 us each (tests/test_urls.py holds the two ways equal).
_CANONICAL_ALREADY = re.compile(
    r"https?://[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*(/[A-Za-z0-9._~!$'()*+,=:@/-]*)(?:\?([A-Za-z0-9_.-]+)=[A-Za-z0-9_.-]*)?")


# The scheme a browser reads in an address (the WHATWG URL standard): leading and trailing spaces and
# control characters dropped, tabs and line breaks anywhere removed, so ` JAVA\tSCRIPT:` is javascript:.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_URL_EDGES = "".join(map(chr, range(0x21)))
_TABS_AND_BREAKS = str.maketrans("", "", "\t\n\r")


def foreign_scheme(url: str) -> bool:
    """Whether `url` names a scheme other than http(s) (javascript:, data:, vbscript:, file:, mailto:):
    an address a reader's browser would run or open rather than visit, never an entry's link."""
    if url.startswith(("https://", "http://")):  # nearly every link: no scan
        return False
    scheme = _SCHEME.match(url.strip(_URL_EDGES).translate(_TABS_AND_BREAKS))
    return scheme is not None and scheme[1].lower() not in _DEFAULT_PORTS


def entry_link(url: str) -> str:
    """An entry's link as adapters store it: canonical_url(url, exact=True), or "" when it names another
    scheme than http(s) (foreign_scheme). A relative link stays as written, as it always has."""
    return "" if foreign_scheme(url) else canonical_url(url, exact=True)


def is_junk_param(name: str) -> bool:
    return bool(_TRACKING.match(name) or _SESSION.match(name))


def canonical_url(url: str, *, exact: bool = False) -> str:
    """Canonical form of an http(s) URL; other strings come back stripped but otherwise unchanged.

    Tracking and session parameters and the fragment go, unless `exact`: then only the spelling is
    made canonical. Adapters store the exact form so that parser/pipeline/identity.py can tell apart entries of
    one feed that differ only by those (`page#a`, `page#b`; `story.jsp;jsessionid=1`). Never raises: a feed's link
    is data from a stranger.
    """
    url = (url or "").strip()
    if is_canonical_already(url, exact):
        return url
    return _canonical(url, exact)


def is_canonical_already(url: str, exact: bool) -> bool:
    """True when canonical_url(url, exact=exact) is `url` itself, known without w3lib."""
    plain = _CANONICAL_ALREADY.fullmatch(url)
    return plain is not None and "/." not in plain[1] and (exact or not plain[2] or not is_junk_param(plain[2])) \
        and not _numeric_host(url[url.index("//") + 2:plain.start(1)])


def _numeric_host(host: str) -> bool:
    """A host whose last label is a number (`0`, `127.1`, `a.0x7f`): the URL standard reads it as an IPv4
    address, and w3lib from 2.6 spells it so (`http://0/` is `http://0.0.0.0/`) or refuses it: w3lib decides."""
    last = host.rsplit(".", 1)[-1]
    return last.isdigit() or (last[:2] == "0x" and all(c in "0123456789abcdef" for c in last[2:]))


def _canonical(written: str, exact: bool) -> str:
    try:
        # One address typed on a Mac (decomposed: e + U+0301) and elsewhere (composed: é) is one link:
        # NFC, as RFC 3987 (3.1) asks of an IRI. Percent-escapes are bytes as written: left alone.
        url = written if written.isascii() else unicodedata.normalize("NFC", written)
        parts = urlsplit(url)
        if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
            return written
        netloc = parts.netloc.rsplit("@", 1)[-1].lower()  # credentials never belong in a stored link
        if parts.port == _DEFAULT_PORTS[parts.scheme.lower()]:
            netloc = netloc.rsplit(":", 1)[0]
        path = parts.path if exact else _PATH_SESSION.sub("", parts.path)
        # The fragment goes to w3lib even when it is to be dropped: w3lib strips control characters
        # at the end of the whole string, so dropping it first would change what is left of the path.
        cleaned = urlunsplit((parts.scheme.lower(), netloc, path or "/", _query(parts.query, exact), parts.fragment))
        done = canonicalize_url(cleaned, keep_fragments=exact)
        # A host w3lib cannot spell (it makes `http:////` of `http://\\#0`) is no address: the string
        # comes back as written, like any other that is none, so its exact form has the same canonical one.
        return done if urlsplit(done).hostname else written
    except (ValueError, UnicodeError):
        return written


def _query(query: str, exact: bool) -> str:
    """The query for w3lib, junk parameters out unless `exact`.

    A query whose escapes are UTF-8 goes through parse_qsl and urlencode, as it always has (its links keep
    their keys). One in a legacy charset (`name=%82%A0`, Shift_JIS) would come out of parse_qsl as
    U+FFFD, and `%82%A2` the same: two items one key. Its parameters are kept as written instead, and
    w3lib, which sorts and spells the escapes without decoding them, keeps their bytes."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        return "&".join(p for p in query.split("&")
                        if p and (exact or not is_junk_param(unquote_plus(p.partition("=")[0]))))
    return urlencode([(k, v) for k, v in pairs if exact or not is_junk_param(k)])


def redact_url(url: str) -> str:
    """The URL with credentials and secret-looking query values hidden, for logs.

    A database URL (DB_URL: any scheme but http(s)) is read as SQLAlchemy reads it, since that is what
    hands its password to the driver: a password may hold '#', '/' or '?', where urlsplit would end
    the address and leave the password in the clear."""
    scheme, sep, _ = url.partition("://")
    if sep and scheme.lower() not in _DEFAULT_PORTS:
        hidden = _redact_db_url(url)
        if hidden is not None:
            return hidden
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    netloc, query = parts.netloc, parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    secret = any(_SECRET_PARAM.search(k) for k, _ in pairs)
    if "@" not in netloc and not secret:
        return url
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    if secret:
        query = urlencode([(k, "***" if _SECRET_PARAM.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def restore_secrets(saved: str, configured: str) -> str | None:
    """An address as a file holds it (redact_url: userinfo and secret-looking query values hidden) with
    what was hidden put back from `configured`, the source's address as params.py gives it: its userinfo,
    and each hidden query value by its name. None when something hidden is not there to put back (a
    token read from the environment, one the server added): that address cannot be used again."""
    if HIDDEN not in saved:
        return saved
    try:
        parts, known = urlsplit(saved), urlsplit(configured)
    except ValueError:
        return None
    netloc = parts.netloc
    if netloc.startswith(HIDDEN + "@"):
        if "@" not in known.netloc:
            return None
        netloc = known.netloc.rsplit("@", 1)[0] + netloc[len(HIDDEN):]
    query = parts.query
    if HIDDEN in query:
        values = dict(parse_qsl(known.query, keep_blank_values=True))
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(v == HIDDEN and k not in values for k, v in pairs):
            return None
        query = urlencode([(k, values[k] if v == HIDDEN else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_db_url(url: str) -> str | None:
    """`url` as SQLAlchemy parses it, user, password and secret-looking query values hidden; None
    when it is no URL SQLAlchemy reads or it holds none of these (it is then shown as written)."""
    # imported on first use: the parse processes load this module for canonical_url, never a database
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        return None
    secret = [k for k in parsed.query if _SECRET_PARAM.search(k)]
    if not (parsed.username or parsed.password or secret):
        return None
    query = {k: ("***" if k in secret else v) for k, v in parsed.query.items()}
    # URL.set takes None for "unchanged": the namedtuple's own _replace empties them.
    shown = parsed.set(query=query)._replace(username=None, password=None)
    if shown.host and "@" in shown.host:
        shown = shown._replace(host="***")  # a password with an unescaped '@': its rest was read as the host
    text = shown.render_as_string(hide_password=False).replace("=%2A%2A%2A", "=***")
    return text.replace("://", "://***@", 1) if parsed.username or parsed.password else text


_SECRET_PARAM = re.compile(r"token|key|secret|pass|auth|sig|session|code", re.IGNORECASE)
HIDDEN = "***"  # what redact_url writes in place of a secret
