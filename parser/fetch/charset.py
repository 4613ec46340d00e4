"""Which character encoding a fetched body is really in, and the body re-encoded as UTF-8.

Servers and feeds disagree more often than one would hope: a server default of ISO-8859-1 or
windows-1251 on a UTF-8 feed, a GB2312 label on text that uses GBK characters, a UTF-8 feed with a
few broken bytes. feedparser follows RFC 3023 to the letter (the header wins, text/* without a
charset is ASCII) and falls back to windows-1252 for the whole document when one byte is wrong,
which turns every other non-ASCII character into mojibake. So the adapters ask here first:

1. a byte order mark decides;
2. a body that is valid UTF-8 and has non-ASCII characters is UTF-8 when anything declares UTF-8 or
   nothing declares anything (a multi-byte UTF-8 sequence almost never happens by chance in 8-bit text);
3. otherwise the declared encodings (header first, as RFC 7303 says, then the XML or HTML prolog)
   that decode the bytes without error, or failing that their wider relative (GB2312 as GB18030,
   Shift_JIS as windows-31j, ...); when header and prolog disagree and both fit, charset_normalizer picks;
4. a body that is mostly UTF-8 with a few bad bytes keeps its UTF-8, the bad bytes become U+FFFD;
5. anything else: the code page of the language the document declares (`<language>pt-br</language>`,
   `xml:lang`, `<html lang>`) when its bytes fit it, else charset_normalizer's guess, where windows-1252
   (what browsers assume for unlabelled text) wins unless the guess reads the bytes with less chaos;
   windows-1252 is the last resort. A short Portuguese text scores the same as Czech, Baltic or DOS
   code pages: the language decides, else windows-1252.

Every choice that overrides a declaration, or replaces bytes, comes back as a warning for errors.log.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from charset_normalizer import from_bytes

# Labels that mean the Windows code page in practice (as browsers read them: WHATWG Encoding).
SAME_AS = {"iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "us-ascii": "cp1252",
           "ascii": "cp1252", "iso-8859-9": "cp1254", "tis-620": "cp874", "iso-8859-11": "cp874"}
# Codecs whose text is often written with a vendor's extensions: tried when the codec itself fails
# (not before: Shift_JIS and windows-31j map a few shared bytes differently, e.g. the wave dash).
WIDER = {"gb2312": "gb18030", "gbk": "gb18030", "big5": "big5hkscs", "shift_jis": "cp932", "euc_kr": "cp949",
         "euc_jp": "euc_jis_2004"}
_PROLOG = re.compile(rb"""^\s*<\?xml[^>]{0,200}?encoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']""")
_META = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?([A-Za-z0-9._:-]{1,40})""", re.IGNORECASE)
# A document's declared language, near its start: RSS <language> (or dc:language), xml:lang, <html lang>.
_LANGUAGE = re.compile(rb"""<(?:[\w.-]+:)?language>\s*([A-Za-z]{2,3})\b|xml:lang\s*=\s*["']([A-Za-z]{2,3})\b|"""
                       rb"""<html\b[^>]{0,200}?\blang\s*=\s*["']?([A-Za-z]{2,3})\b""", re.IGNORECASE)
# The single-byte code page each language is written in when nothing is declared (the Windows ones, as
# browsers read them). Languages of multi-byte encodings are left to the detector.
_CODE_PAGE = {
    **dict.fromkeys(("af", "ca", "da", "de", "en", "es", "eu", "fi", "fo", "fr", "ga", "gl", "id", "is", "it",
                     "ms", "nb", "nl", "nn", "no", "pt", "sq", "sv", "sw"), "cp1252"),
    **dict.fromkeys(("bs", "cs", "hr", "hu", "pl", "ro", "sk", "sl"), "cp1250"),
    **dict.fromkeys(("be", "bg", "mk", "ru", "sr", "uk"), "cp1251"),
    "el": "cp1253", "tr": "cp1254", "az": "cp1254", "he": "cp1255", "ar": "cp1256", "fa": "cp1256",
    "ur": "cp1256", "et": "cp1257", "lt": "cp1257", "lv": "cp1257", "vi": "cp1258", "th": "cp874",
}
_CHARSET = re.compile(r"""charset\s*=\s*["']?([A-Za-z0-9._:-]{1,40})""", re.IGNORECASE)
# UTF-16/32 without a BOM and EBCDIC: the XML prolog's first bytes in those encodings.
_WIDE_STARTS = (b"\x00\x00\x00<", b"<\x00\x00\x00", b"\x00<\x00?", b"<\x00?\x00", b"\x4c\x6f\xa7\x94")
_BOMS = ((codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_BE, "utf-16"), (codecs.BOM_UTF16_LE, "utf-16"))


@dataclass
class Decoded:
    body: bytes                 # the body as UTF-8 (unchanged when `encoding` is "")
    encoding: str               # the Python codec it was read with; "" when left to the parser
    warnings: list[str] = field(default_factory=list)


def codec_name(label: str | None) -> str | None:
    """The Python codec for a charset label; None when unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    try:
        name = codecs.lookup(SAME_AS.get(label, label)).name
    except LookupError:
        return None
    return "utf-8" if name in ("utf-8", "utf_8") else name


def header_charset(content_type: str) -> str | None:
    match = _CHARSET.search(content_type or "")
    return match.group(1) if match else None


def declared_charset(body: bytes) -> str | None:
    """The encoding named by an XML declaration or an HTML meta tag near the start of `body`."""
    head = body[:2048]
    match = _PROLOG.match(head) or _META.search(head)
    return match.group(1).decode("ascii") if match else None


def to_utf8(body: bytes, content_type: str = "") -> Decoded:
    """Decide the body's encoding (see the module's docstring) and return it re-encoded as UTF-8."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return _decoded(body.decode(codec, "replace"), codec)
    if body.startswith(_WIDE_STARTS):
        return Decoded(body=body, encoding="")  # UTF-16/32 or EBCDIC without a BOM: the parser sniffs it
    header_label, prolog_label = header_charset(content_type), declared_charset(body)
    header, prolog = codec_name(header_label), codec_name(prolog_label)
    declared = [c for c in dict.fromkeys((header, prolog)) if c]
    try:
        body.decode("ascii")
        return Decoded(body=body, encoding="ascii")
    except UnicodeDecodeError:
        pass
    if not declared or "utf-8" in declared or not _fits(body, declared):
        try:
            body.decode("utf-8")  # only a check: UTF-8 that decodes is its own UTF-8 form
        except UnicodeDecodeError:
            pass
        else:
            result = Decoded(body=body, encoding="utf-8")
            if header and prolog and header != prolog:
                result.warnings.append(_disagree(header_label, prolog_label, "utf-8"))
            elif declared and declared != ["utf-8"]:
                result.warnings.append(f"charset {(header_label or prolog_label)!r} declared, but the bytes "
                                       "are UTF-8; read as utf-8")
            return result
    fitting = [c for c in declared if c != "utf-8" and _fits(body, [c])] or \
        [WIDER[c] for c in declared if c in WIDER and _fits(body, [WIDER[c]])]
    if fitting:
        codec = fitting[0] if len(fitting) == 1 else _best_of(body, fitting)
        result = _decoded(body.decode(codec), codec)
        if header and prolog and header != prolog:
            result.warnings.append(_disagree(header_label, prolog_label, codec))
        return result
    text = body.decode("utf-8", "replace")
    bad = text.count("\ufffd") - body.decode("utf-8", "ignore").count("\ufffd")
    good = sum(1 for c in text if c > "\x7f" and c != "\ufffd")
    if good > bad and (not declared or "utf-8" in declared):
        result = _decoded(text, "utf-8")
        result.warnings.append(f"invalid UTF-8: {bad} byte sequence{'s' if bad != 1 else ''} replaced by U+FFFD")
        return result
    language, by_language = declared_language(body), None
    if language and _CODE_PAGE.get(language) and _fits(body, [_CODE_PAGE[language]]):
        by_language = _CODE_PAGE[language]
    codec = by_language or _guess(body) or "cp1252"
    result = _decoded(body.decode(codec, "replace"), codec)
    labels = " and ".join(repr(x) for x in dict.fromkeys((header_label, prolog_label)) if x)
    said = f"declared charset {labels} does not fit the bytes" if labels else \
        "no charset declared and the bytes are not UTF-8"
    how = f"the document's language {language!r}" if by_language else "detected"
    result.warnings.append(f"{said}; read as {codec} ({how})")
    return result


def _decoded(text: str, codec: str) -> Decoded:
    return Decoded(body=text.encode("utf-8", "replace"), encoding=codec)


def _fits(body: bytes, codecs_: list[str]) -> bool:
    for codec in codecs_:
        try:
            body.decode(codec)
            return True
        except (UnicodeDecodeError, LookupError):
            continue
    return False


def _best_of(body: bytes, candidates: list[str]) -> str:
    """The candidate whose reading looks most like language (charset_normalizer's measure)."""
    best = from_bytes(body[:65536], cp_isolation=candidates).best()
    name = codec_name(best.encoding) if best else None
    return name if name in candidates else candidates[0]


def declared_language(body: bytes) -> str | None:
    """The primary language subtag ('pt' of 'pt-br') a document declares near its start, lower case."""
    match = _LANGUAGE.search(body[:4096])
    if not match:
        return None
    return next(g for g in match.groups() if g).decode("ascii").lower()


def _guess(body: bytes) -> str | None:
    """charset_normalizer's pick, unless windows-1252 (the guess of browsers for unlabelled text) reads
    the bytes with no more chaos than that pick: the detector is confident of another code page only
    when its reading is cleaner. Its coherence (which language the letters resemble) does not count:
    a short Portuguese text is as coherent in cp1257, cp775 or cp1250 as in cp1252, while Cyrillic,
    Greek or Hebrew bytes read as windows-1252 are chaos, so those keep the detector's pick."""
    head = body[:65536]
    results = from_bytes(head)
    best = results.best()
    if best is None:
        return None
    if codec_name(best.encoding) != "cp1252" and _fits(head, ["cp1252"]):
        western = next((m for m in results if codec_name(m.encoding) == "cp1252"), None) or \
            from_bytes(head, cp_isolation=["cp1252"]).best()
        if western is not None and western.chaos <= best.chaos:
            return "cp1252"
    return codec_name(best.encoding)


def _disagree(header_label: str | None, prolog_label: str | None, used: str) -> str:
    return f"charset disagreement: the HTTP header says {header_label!r}, the document says " \
           f"{prolog_label!r}; read as {used}"
