"""Dates as feeds and APIs write them, into one form: UTC ISO 8601 with a four-digit year.

Feeds are written by hand-made templates in every language: `mer, 16 nov 2022 00:38:15 +0100`,
`Ср, 16 ноя 2022`, `2022年11月16日 00:38`. A small table of month and day names (below) turns the
names into English, then the standard readers take over: ISO 8601 strictly (dateutil.isoparse),
anything else (RFC 822 included) dateutil, with the zone names it lacks. A date that does not exist
(`2022-02-30`, month 13) is no date: no reader may roll it over into the next month. A time without
a zone is taken as UTC, and the caller is told (ReadDate.zoned), so parser.log can say it once.
Nothing is taken from today: a text without a year, or with a year but neither month nor day given in
any way, is no date (`5 March`, `10:30`, `Tuesday`); a year and a month without a day is the 1st of that
month, and a year alone the 1st of January, as feedparser reads `2024-03` and `2024`. So the same text
is the same value on any day.

Numbers are times since the epoch; see from_epoch for the unit rule.
"""
from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as dt_time
from functools import lru_cache
from typing import Any

from dateutil import parser as dateutil_parser
from dateutil import tz

# Month names and abbreviations (lower case, without a trailing dot), per month, in the languages
# feeds are most often written in besides English: fr de es it pt nl sv da nb pl cs tr ru uk.
_MONTHS: tuple[tuple[str, ...], ...] = (
    ("janvier", "janv", "januar", "jänner", "jän", "enero", "ene", "gennaio", "gen", "janeiro", "januari",
     "styczeń", "stycznia", "sty", "leden", "ledna", "ocak", "oca",
     "январь", "января", "янв", "січень", "січня", "січ"),
    ("février", "fevrier", "févr", "fevr", "fév", "fev", "februar", "feber", "febrero", "febbraio", "fevereiro",
     "februari", "luty", "lutego", "lut", "únor", "února", "şubat", "şub",
     "февраль", "февраля", "фев", "февр", "лютий", "лютого", "лют"),
    ("mars", "märz", "mär", "mrz", "marzo", "março", "marco", "maart", "mrt", "marts", "marzec", "marca",
     "březen", "března", "mart", "mar",
     "март", "марта", "мар", "березень", "березня", "бер"),
    ("avril", "avr", "abril", "abr", "aprile", "kwiecień", "kwietnia", "kwi", "duben", "dubna", "nisan", "nis",
     "апрель", "апреля", "апр", "квітень", "квітня", "кві", "квіт"),
    ("mai", "mayo", "maggio", "mag", "maio", "mei", "maj", "maja", "květen", "května", "mayıs",
     "май", "мая", "травень", "травня", "тра", "трав"),
    ("juin", "junio", "giugno", "giu", "junho", "czerwiec", "czerwca", "cze", "červen", "června",
     "haziran", "haz",
     "июнь", "июня", "июн", "червень", "червня", "чер", "черв"),
    ("juillet", "juil", "julio", "luglio", "lug", "julho", "lipiec", "lipca", "lip", "červenec", "července",
     "temmuz", "tem",
     "июль", "июля", "июл", "липень", "липня", "лип"),
    ("août", "aout", "aoû", "agosto", "ago", "augusti", "sierpień", "sierpnia", "sie", "srpen", "srpna",
     "ağustos", "ağu",
     "август", "августа", "авг", "серпень", "серпня", "сер", "серп"),
    ("septembre", "septiembre", "setiembre", "settembre", "setembro", "set", "wrzesień", "września", "wrz",
     "září", "eylül", "eyl",
     "сентябрь", "сентября", "сен", "сент", "вересень", "вересня", "вер"),
    ("octobre", "oktober", "okt", "octubre", "ottobre", "ott", "outubro", "out", "październik", "października",
     "paź", "říjen", "října", "ekim", "eki",
     "октябрь", "октября", "окт", "жовтень", "жовтня", "жов", "жовт"),
    ("novembre", "noviembre", "novembro", "listopad", "listopada", "listopadu", "lis", "kasım", "kas",
     "ноябрь", "ноября", "ноя", "нояб", "листопад", "листопада", "лист"),
    ("décembre", "decembre", "déc", "dezember", "dez", "diciembre", "dic", "dicembre", "dezembro", "desember",
     "des", "grudzień", "grudnia", "gru", "prosinec", "prosince", "aralık", "ara",
     "декабрь", "декабря", "дек", "грудень", "грудня", "груд"),
)
_MONTH_OF = {name: number for number, names in enumerate(_MONTHS, 1) for name in names}
assert len(_MONTH_OF) == sum(len(names) for names in _MONTHS), "a month name is listed under two months"
_ENGLISH = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# Day names carry nothing a date needs: they are dropped. ("mar" is Tuesday in fr/es/it and March
# too: a first word followed by a comma is a day, any other is read as a month.)
_WEEKDAYS = frozenset((
    "lun", "mar", "mer", "jeu", "ven", "sam", "dim", "lundi", "mardi", "mercredi", "jeudi", "vendredi",
    "samedi", "dimanche", "mo", "di", "mi", "do", "fr", "sa", "so", "montag", "dienstag", "mittwoch",
    "donnerstag", "freitag", "samstag", "sonnabend", "sonntag", "mié", "mie", "jue", "vie", "sáb", "sab",
    "dom", "lunes", "martes", "miércoles", "miercoles", "jueves", "viernes", "sábado", "sabado", "domingo",
    "gio", "lunedì", "martedì", "mercoledì", "giovedì", "venerdì", "sabato", "domenica", "seg", "ter", "qua",
    "qui", "sex", "segunda", "terça", "quarta", "quinta", "sexta", "feira", "ma", "wo", "vr", "za", "zo",
    "maandag", "dinsdag", "woensdag", "donderdag", "vrijdag", "zaterdag", "zondag", "mån", "tis", "ons",
    "tor", "fre", "lör", "sön", "man", "tir", "lør", "søn", "måndag", "tisdag", "onsdag", "torsdag",
    "fredag", "lördag", "söndag", "mandag", "tirsdag", "lørdag", "søndag", "pon", "wt", "śr", "czw", "pt",
    "sob", "niedz", "nie", "po", "út", "st", "čt", "pá", "ne", "pzt", "sal", "çar", "per", "cum", "cmt",
    "paz", "пн", "вт", "ср", "чт", "пт", "сб", "вс", "нд",
))
# Words between the parts of a date in some languages ("16 de noviembre de 2022", "16 листопада 2022 р.").
_FILLERS = frozenset(("de", "del", "à", "um", "om", "kl", "г", "р", "года", "року", "в", "о"))
# Zone names dateutil does not know by itself (RFC 822's, and the common European and Asian ones).
_ZONES = {"UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "WET": 0, "WEST": 1, "BST": 1, "CET": 1, "CEST": 2, "MET": 1,
          "MEST": 2, "EET": 2, "EEST": 3, "MSK": 3, "IST": 5.5, "JST": 9, "KST": 9, "HKT": 8, "SGT": 8,
          "AEST": 10, "AEDT": 11, "EST": -5, "EDT": -4, "CST": -6, "CDT": -5, "MST": -7, "MDT": -6,
          "PST": -8, "PDT": -7, "AKST": -9, "AKDT": -8, "HST": -10, "NZST": 12, "NZDT": 13}

_WORD = re.compile(r"(?<![^\W\d_])[^\W\d_]+\.?(?![^\W\d_])")
_CJK = re.compile(r"(\d{4})\s*[年년]\s*(\d{1,2})\s*[月월]\s*(\d{1,2})\s*[日일]?")
_CJK_WEEKDAY = re.compile(r"[(（][^)）]{1,4}[)）]|星期.|[月火水木金土日]曜日?")
_ISO = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}")
# RFC 822 as nearly every RSS feed writes it, read without dateutil (ten times faster); the rest
# goes to dateutil.
_RFC822 = re.compile(r"^(?:[A-Za-z]{3},?\s*)?(\d{1,2})\s+([A-Za-z]{3})[a-z]*\s+(\d{4})\s+(\d{1,2}):(\d{2})"
                     r"(?::(\d{2}))?\s*(?:([+-])(\d{2}):?(\d{2})|([A-Za-z]{1,5}))?$")
_MONTH_NUMBER = {name.lower(): number for number, name in enumerate(_ENGLISH, 1)}
# The ISO 8601 most Atom feeds write: read by datetime.fromisoformat (C), which agrees with
# dateutil.isoparse on these at a fiftieth of the cost (tests/test_dates_iso.py holds the two equal).
# Second 60 of a time (hh:mm:60, a fraction after it or not).
_LEAP = re.compile(r"((?<!\d)\d{1,2}:[0-5]\d:)60(?![\d:])")
_ISO_PLAIN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)")


@dataclass(frozen=True)
class ReadDate:
    iso: str = ""        # UTC ISO 8601, "" when the text is no date
    zoned: bool = True   # False: the text gave no zone and UTC was assumed


def format_utc(dt: datetime) -> str:
    """'0999-01-01T00:00:00Z': four-digit years, so that the text sorts as the time does."""
    dt = dt.astimezone(UTC)
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}Z"


@lru_cache(maxsize=1024)  # an entry's date is read for its age (newest first) and as published or updated
def read_date(text: str) -> ReadDate:
    """A date written as text, in any of the forms above; ReadDate() when it is none."""
    text = " ".join(str(text).split())
    if not text:
        return ReadDate()
    try:
        # A leap second (23:59:60 UTC, RFC 3339 5.7) no reader takes: read as :59, then one second on,
        # which is the next day's 00:00:00. Second 60 anywhere but at the end of a UTC day is no time.
        text, leap = _LEAP.subn(r"\g<1>59", text, count=1)
        # Most dates are ISO 8601 or English RFC 822: read those as they are, translate only the rest.
        fast = looks_iso(text) or ((rfc822 := _RFC822.match(text)) and rfc822[2].lower() in _MONTH_NUMBER)
        dt = _parse(text if fast else _english(text))
        if dt is None:
            return ReadDate()
        zoned = dt.tzinfo is not None
        dt = dt if zoned else dt.replace(tzinfo=UTC)
        if leap:
            dt += timedelta(seconds=1)
            if dt.astimezone(UTC).time().replace(microsecond=0) != dt_time(0, 0, 0):
                return ReadDate()
        return ReadDate(format_utc(dt), zoned)
    except (ValueError, OverflowError, TypeError, ArithmeticError):
        return ReadDate()


def writes_year(text: str, year: int) -> bool:
    """Whether `text` writes `year` in four digits. feedparser fills a missing year in from today (`05/20
    7:03 am`, `10:30`): its reading of a text our reader refused is taken only when the text writes the
    year it found (its own formats, Korean, Greek, Hungarian, all do)."""
    return bool(re.search(rf"(?<!\d){year:04d}(?!\d)", text))


def looks_iso(text: str) -> bool:
    """ISO-like text is read strictly: no reader may guess around an impossible day or month."""
    return bool(_ISO.match(text.strip()))


# One number, in four units, chosen so that every unit is read right up to the year 9999: seconds up
# to 253402300799 (9999-12-31T23:59:59), then milliseconds up to 9999 in milliseconds, then
# microseconds, then nanoseconds. Seconds are right for every date from 1970 (and back to the year 1);
# the larger units for every date from 1978-01-12 on: a time in milliseconds before 1978-01-12 (under
# 253402300800) is read as seconds. Beyond the year 9999 (or before 1) there is no date.
_SECONDS_LIMIT = 253402300800  # 10000-01-01T00:00:00Z
EPOCH_UNITS = ((_SECONDS_LIMIT, 1), (_SECONDS_LIMIT * 1e3, 1e3), (_SECONDS_LIMIT * 1e6, 1e6), (float("inf"), 1e9))


def from_epoch(value: float) -> datetime:
    """A time since 1970-01-01 UTC as a datetime (units by magnitude, see EPOCH_UNITS)."""
    divisor = next(d for limit, d in EPOCH_UNITS if abs(value) < limit)
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=value / divisor)


def utc_iso(value: Any) -> str:
    """UTC ISO 8601 ('2024-05-20T08:30:00Z') from a struct_time, datetime, epoch number or date text.

    Naive times are taken as UTC; anything unreadable gives ''.
    """
    if value is None or value == "":
        return ""
    try:
        if isinstance(value, time.struct_time):
            return format_utc(datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=calendar.timegm(value)))
        if isinstance(value, datetime):
            return format_utc(value if value.tzinfo else value.replace(tzinfo=UTC))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return format_utc(from_epoch(value))
    except (ValueError, OverflowError, OSError, TypeError, ArithmeticError):
        return ""
    return read_date(str(value)).iso


def _english(text: str) -> str:
    """Month names in English, day names and filler words dropped, CJK dates as ISO."""
    text = _CJK_WEEKDAY.sub(" ", _CJK.sub(lambda m: f"{m[1]}-{int(m[2]):02d}-{int(m[3]):02d}", text))
    words: list[str] = []
    position = 0
    for match in _WORD.finditer(text):
        word = match.group().rstrip(".").lower()
        first, after = not words and not text[:match.start()].strip(), text[match.end():match.end() + 1]
        if (first and after == "," and word in _WEEKDAYS) or (word not in _MONTH_OF and word in _WEEKDAYS):
            replacement = ""
        elif word in _MONTH_OF:
            replacement = _ENGLISH[_MONTH_OF[word] - 1]
        elif word in _FILLERS:
            replacement = " "
        else:
            continue
        words.append(text[position:match.start()] + replacement)
        position = match.end()
        if replacement == "" and text[position:position + 1] in ",-":
            position += 1  # "Ср," and "segunda-feira" leave no stray comma or hyphen
    return " ".join(("".join(words) + text[position:]).split()).strip(" ,")


def _parse(text: str) -> datetime | None:
    if _ISO_PLAIN.fullmatch(text):
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass  # hour 24, second 60, 30 February: the readers below decide as they always have
    if looks_iso(text):
        try:
            return dateutil_parser.isoparse(text)
        except ValueError:
            # "2022-11-16T00:38:15 +0100" is ISO with a space; dateutil also refuses impossible days.
            return dateutil_parser.parse(text, tzinfos=_zone)
    match = _RFC822.match(text)
    if match and match[2].lower() in _MONTH_NUMBER:
        return _from_rfc822(match)
    return _dateutil(text)


# dateutil fills what a text lacks from a default date (today's, unless told): two defaults that differ
# in year, month and day show which parts the text gave. (Year 4 and 8 are leap years: a 29 February
# given without a year reads under either.)
_DEFAULT_A = datetime(4, 1, 1)
_DEFAULT_B = datetime(8, 2, 2)


def _dateutil(text: str) -> datetime | None:
    """dateutil's reading of `text` with nothing taken from today: see the module's docstring."""
    dt = dateutil_parser.parse(text, default=_DEFAULT_A, tzinfos=_zone)
    if dt.year != _DEFAULT_A.year and dt.month != _DEFAULT_A.month and dt.day != _DEFAULT_A.day:
        return dt  # every part given (the common case: one reading)
    other = dateutil_parser.parse(text, default=_DEFAULT_B, tzinfos=_zone)
    if dt.year != other.year:
        return None  # no year: `5 March`, `10:30`, `Tuesday`
    if dt.month != other.month:  # a year alone is 1 January; a day without a month is no date
        return dt.replace(month=1, day=1) if dt.day != other.day else None
    return dt if dt.day == other.day else dt.replace(day=1)


def _from_rfc822(match: re.Match) -> datetime:
    day, month, year, hour, minute, second, sign, zone_h, zone_m, zone_name = match.groups()
    dt = datetime(int(year), _MONTH_NUMBER[month.lower()], int(day), int(hour), int(minute), int(second or 0))
    if sign:
        offset = timedelta(hours=int(zone_h), minutes=int(zone_m))
        return dt.replace(tzinfo=UTC) - (offset if sign == "+" else -offset)
    zone = _zone(zone_name, None) if zone_name else None
    return dt.replace(tzinfo=zone) if zone is not None else dt


def _zone(name: str | None, offset: int | None) -> tz.tzoffset | None:
    """dateutil's zone lookup: a numeric offset, a known zone name, else None (no zone)."""
    if offset is not None:
        return tz.tzoffset(name, offset)
    hours = _ZONES.get((name or "").upper())
    return None if hours is None else tz.tzoffset(name, int(hours * 3600))


def iso(epoch: float) -> str:
    """Epoch seconds as the ISO 8601 UTC time every file the daemon writes uses (whole seconds, floored)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
