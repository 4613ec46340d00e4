"""The plain ISO 8601 shortcut in parser/core/dates.py (datetime.fromisoformat) reads every text it takes
exactly as the careful path (dateutil) does, including the ones it hands back (hour 24, 30 February)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from parser.core import dates


def _two(low: int, high: int):
    return st.integers(low, high).map("{:02d}".format)


_ISO_TEXTS = st.builds(
    lambda y, mo, d, h, mi, s, frac, zone: f"{y:04d}-{mo}-{d}T{h}:{mi}:{s}{frac}{zone}",
    st.integers(1, 9999), _two(0, 13), _two(0, 32), _two(0, 25), _two(0, 60), _two(0, 61),
    st.sampled_from(["", ".5", ".123456", ".999999", ".1234567"]),
    st.sampled_from(["Z", "+00:00", "+01:00", "-05:30", "+14:00", "+23:59", "-00:00", "+24:00", ""]))


class _Never:
    @staticmethod
    def fullmatch(_text):
        return None


@settings(max_examples=3000, deadline=None)
@given(_ISO_TEXTS)
def test_iso_shortcut_agrees_with_dateutil(text):
    fast = dates.read_date(text).iso
    pattern = dates._ISO_PLAIN
    dates._ISO_PLAIN = _Never
    try:
        careful = dates.read_date(text).iso
    finally:
        dates._ISO_PLAIN = pattern
    assert fast == careful


def test_the_shortcut_reads_common_atom_dates():
    assert dates.read_date("2024-05-20T08:30:00Z").iso == "2024-05-20T08:30:00Z"
    assert dates.read_date("2024-05-20T08:30:00.123+02:00").iso == "2024-05-20T06:30:00Z"
    assert dates.read_date("2024-02-30T08:30:00Z").iso == ""
