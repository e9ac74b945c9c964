"""The time expressions of :mod:`tui.engine.temporal`: one rule per kind of expression, each a
regex (run on an ASCII-lowercased copy of the query) and a builder of its window.

Rules are tried in the order they are defined here (:data:`RULES`).

Windows are inclusive ``(start, end)`` date pairs relative to ``now``. Weeks start on Monday.
"Occurrence" rules for named periods (a month, a month-day, a season, a holiday) share one
resolver:

* bare / ``in`` / ``on`` / ``at`` / ``over`` / ``during`` X: the latest occurrence that has
  started (start <= now);
* ``last`` / ``past`` X: the latest occurrence that has ended (end < now), so on 2026-12-25 and
  2026-12-26 "last Christmas" is 2025 and in January "last December" is the previous year's;
* ``this`` X: the occurrence containing now, else the one labelled with now's year;
* ``next`` X: the first occurrence starting after now;
* X with a year (``May 2023``, ``Christmas 2023``, ``summer of 2023``): that year's occurrence.

============================================  =================================================
expression                                    window
============================================  =================================================
today, tonight, this morning/afternoon/...    now..now (but see "today" as a state marker)
yesterday, last night                         now-1
the day before yesterday                      now-2
tomorrow / the day after tomorrow             now+1 / now+2
N days ago (digits, one..twenty, a/an)        exactly now-N
a couple of / a few / several days ago        now-3..now-1 / now-4..now-2 / now-7..now-3
                                              (vague counts: couple=2+-1, few=3+-1, several 3-7)
this week / month / year                      Monday / 1st / Jan 1 of the current unit .. now
last (previous) week / month / year           the whole previous calendar unit
next week / month / year                      the whole next calendar unit
N weeks / months / years ago                  the whole calendar unit N units before now's
                                              ("two weeks ago" = Mon..Sun of the week holding
                                              now-14); vague counts cover units lo..hi back
the past week, the last month, past N days,   rolling: now minus N units .. now (vague counts
in the last few weeks                         use their upper bound: couple 3, few 4, several 7);
                                              "(the) last day" without a count: no window
last weekend                                  Sat..Sun of the previous calendar week
this weekend / next weekend                   Sat..Sun of the current / next calendar week
the weekend, over the weekend                 the latest Sat..Sun that has started
last Monday, on Monday, Monday                the latest such weekday strictly before now
this Monday / next Monday                     that day of the current week / first after now
(every Monday, on Mondays)                    no window
in May, May, last May, this May, next May     the whole month, by the occurrence rules; "may"
                                              and "march" count only after in / last / this /
                                              next / of / early / mid / late / since / before /
                                              after / until / till / from / between / during,
                                              or with a day or a year; abbreviations (jan,
                                              mar, sept...) only with a day or a year
May 2023, in May 2023, May of 2023            2023-05-01..2023-05-31
early / mid / late May [2023]                 days 1-10 / 11-20 / 21-end of that month
May 5, May 5th, 5 May, 5th of May             that day, latest occurrence on or before now
May 5, 2023 / 5 May 2023 / 5th of May 2023    that exact day
a bare 2023 (no preposition before it)        no window (it may be a count, a port...)
2023-05-08, 2023/05/08, 05/08/2023 (US M/D)   that exact day
2023-05                                       that month
on the 5th                                    the latest 5th of a month on or before now
this year, last year, in 2023, during 2023    year rules above; a bare year needs a preposition
                                              (in, during, since, before, after, until, from,
                                              between, by, around, of, and, to, through) and
                                              must lie in 1800..now.year+10 and not be
                                              followed by a unit (px, tokens, bytes...)
early / mid / late 2023                       Jan-Apr / May-Aug / Sep-Dec 2023
the 90s, the 2010s, 1990s                     the decade; "the 20s" is the latest one started
                                              ("in my 20s" is an age: no window)
spring / summer / autumn (fall) / winter      meteorological: Mar-May / Jun-Aug / Sep-Nov /
                                              Dec-Feb; winter Y = Dec Y..end of Feb Y+1. Needs
                                              last / this / next / past / in / during / over /
                                              a year / early-mid-late ("spring" and "fall"
                                              after "in" need "the": "in the fall").
early / mid / late summer                     first / second / third month of the season
Christmas (Xmas)                              Dec 24..Dec 26
Christmas Eve / Christmas Day                 Dec 24 / Dec 25
New Year('s) [Y]                              Dec 31 (Y-1)..Jan 1 Y; New Year's Eve Y = Dec 31 Y;
                                              New Year's Day = Jan 1
Halloween / Valentine's Day                   Oct 31 / Feb 14
Thanksgiving                                  4th Thursday of November (US)
Easter                                        Good Friday..Easter Monday (anonymous Gregorian
                                              algorithm); Easter Sunday, Easter Monday and Good
                                              Friday alone are single days
Independence Day, Fourth of July              Jul 4
the other day                                 now-14..now
since X, starting X                           X.start..now
as of X                                       date.min..X.end (the state up to X)
the Monday / weekend before (after) <date>    from that day to the date (or from the date to
                                              that day): the date's log may be where it is told
after X                                       X.end+1..now
before X, prior to X                          date.min..X.start-1
until X, till X, up until X                   date.min..X.end
between X and Y, from X to Y, X to Y, X - Y   X.start..Y.end (the union); a year on one side
                                              lends itself to the other: "between May and
                                              July 2023" = 2023-05-01..2023-07-31
============================================  =================================================
"""

from __future__ import annotations

import re
from calendar import monthrange
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache

from .calendar_windows import (
    Occurrence,
    Window,
    add_months,
    holiday_occurrence,
    monday_of,
    month_window,
    resolve,
    shift_months,
    year_window,
)

#: Patterns run on an ASCII-lowercased copy of the query (same length), so no IGNORECASE.
FLAGS = re.ASCII
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


# ---------------------------------------------------------------------------------------------
# Vocabulary

_MONTHS_FULL = (
    "january february march april may june july august september october november december"
).split()
_MONTH_NUM = {name: i + 1 for i, name in enumerate(_MONTHS_FULL)}
_MONTH_NUM.update(
    {name[:3]: i + 1 for i, name in enumerate(_MONTHS_FULL) if name != "may"} | {"sept": 9}
)
_AMBIGUOUS_MONTHS = {"may", "march"}
_M_FULL = "|".join(_MONTHS_FULL)
_M_ALL = _M_FULL + "|sept|jan|feb|mar|apr|jun|jul|aug|sep|oct|nov|dec"
_M_BARE = "|".join(m for m in _MONTHS_FULL if m not in _AMBIGUOUS_MONTHS)

_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
WEEKDAY_NUM = {name: i for i, name in enumerate(_WEEKDAYS)}

_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_NUMBERS = {word: i + 1 for i, word in enumerate(_NUMBER_WORDS)} | {"a": 1, "an": 1}
#: Vague counts for "N units ago": (fewest, most) units back.
_VAGUE = {"couple": (1, 3), "few": (2, 4), "several": (3, 7)}
_COUNT = (
    r"(?P<n>\d{1,6}|(?:a )?couple(?: of)?|(?:a )?few|several|"
    + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
    + r"|an?)"
)

_SEASON_MONTH = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}

#: Words after "this may" / "in march" that show a month, not a modal verb or a march.
_MONTH_FOLLOWERS = frozenset(
    "i we you he she they my our his her their and or when while what where who which at in on "
    "for with did was were had last this so then but because".split()
)


def _count(text: str) -> tuple[int, int]:
    """Parse a count phrase into (fewest, most); equal for an exact count."""
    word = text.lower().removeprefix("a ").removesuffix(" of")
    if word in _VAGUE:
        return _VAGUE[word]
    n = _NUMBERS[word] if word in _NUMBERS else int(word)
    return n, n


def _count_upper(text: str) -> int:
    """A count for rolling windows: vague counts take their upper bound."""
    return _count(text)[1]


# ---------------------------------------------------------------------------------------------
# Hits


@dataclass
class Hit:
    """One recognised time expression."""

    pstart: int  # where the phrase starts (includes "in", "since"... if matched)
    start: int  # where the core starts, for connector and range logic
    end: int
    window: Window
    rank: int  # tie-break: 0 explicit date, 1 named / relative, 3 vague
    year: int | None = None  # an explicit year
    rebuild: Callable[[int], Window] | None = None  # the same expression in another year
    today: bool = False


_Builder = Callable[[re.Match[str], date], "Hit | None"]
RULES: list[tuple[re.Pattern[str], _Builder]] = []


def _rule(pattern: str) -> Callable[[_Builder], _Builder]:
    def register(builder: _Builder) -> _Builder:
        RULES.append((re.compile(pattern, FLAGS), builder))
        return builder

    return register


def _hit(m: re.Match[str], window: Window, rank: int = 1, core: str | None = None) -> Hit:
    start = m.start(core) if core and m.start(core) >= 0 else m.start()
    return Hit(m.start(), start, m.end(), window, rank)


def _occurrence_hit(
    m: re.Match[str],
    occurrence: Occurrence,
    now: date,
    *,
    mode: str = "in",
    year: int | None = None,
    rank: int = 1,
    core: str | None = None,
) -> Hit | None:
    """A recurring window (a month day, a season, a holiday): in ``year`` when the text names
    one, else the occurrence ``mode`` picks around ``now``, kept in ``rebuild`` so a year said
    elsewhere in the question can move it."""
    if year is not None:
        hit = _hit(m, occurrence(year), rank, core)
        hit.year = year
        return hit
    window = resolve(occurrence, mode, now)
    if window is None:
        return None
    hit = _hit(m, window, rank, core)
    hit.rebuild = occurrence
    return hit


@_rule(
    r"\b(?:(?P<dby>the day before yesterday)|(?P<dat>the day after tomorrow)|(?P<y>yesterday)|"
    r"(?P<t>today)|(?P<tm>tomorrow)|(?P<ln>last night)|tonight|this (?:morning|afternoon|evening))"
    r"\b"
)
def _days(m: re.Match[str], now: date) -> Hit:
    if m.group("dby"):
        offset = -2
    elif m.group("dat"):
        offset = 2
    elif m.group("y") or m.group("ln"):
        offset = -1
    elif m.group("tm"):
        offset = 1
    else:
        offset = 0
    day = now + timedelta(days=offset)
    hit = _hit(m, (day, day))
    hit.today = bool(m.group("t"))
    return hit


@_rule(r"\bthe other day\b")
def _the_other_day(m: re.Match[str], now: date) -> Hit:
    return _hit(m, (now - timedelta(days=14), now), rank=3)


@_rule(r"\b" + _COUNT + r"[ -](?P<u>day|week|month|year)s? ago\b")
def _ago(m: re.Match[str], now: date) -> Hit:
    lo, hi = _count(m.group("n"))
    unit = m.group("u").lower()
    if unit == "day":
        window = now - timedelta(days=hi), now - timedelta(days=lo)
    elif unit == "week":
        monday = monday_of(now)
        window = monday - timedelta(weeks=hi), monday - timedelta(weeks=lo) + timedelta(days=6)
    elif unit == "month":
        first = add_months(now.year, now.month, -hi)
        last = add_months(now.year, now.month, -lo)
        window = month_window(*first)[0], month_window(*last)[1]
    else:
        window = year_window(now.year - hi)[0], year_window(now.year - lo)[1]
    return _hit(m, window, rank=1 if lo == hi else 2)


@_rule(
    r"\b(?:(?P<the>the) )?(?P<w>last|past|previous) (?:(?:the )?" + _COUNT + r"[ -])?"
    r"(?P<u>day|week|month|year)(?P<pl>s)?\b"
)
def _last_unit(m: re.Match[str], now: date) -> Hit | None:
    unit = m.group("u").lower()
    which = m.group("w").lower()
    rolling = m.group("n") is not None or m.group("the") is not None or which == "past"
    if not rolling:
        if m.group("pl") or unit == "day":
            return None
        if unit == "week":
            monday = monday_of(now)
            return _hit(m, (monday - timedelta(days=7), monday - timedelta(days=1)))
        if unit == "month":
            return _hit(m, month_window(*add_months(now.year, now.month, -1)))
        return _hit(m, year_window(now.year - 1))
    if m.group("n") is None and (m.group("pl") or (unit == "day" and which != "past")):
        return None  # "the past weeks" is too vague; "the last day" of something is not a date
    n = _count_upper(m.group("n")) if m.group("n") else 1
    if unit == "day":
        start = now - timedelta(days=n)
    elif unit == "week":
        start = now - timedelta(weeks=n)
    elif unit == "month":
        start = shift_months(now, -n)
    else:
        start = shift_months(now, -12 * n)
    return _hit(m, (start, now), rank=2)


@_rule(r"\b(?P<w>this|next) (?P<u>week|month|year)\b")
def _this_unit(m: re.Match[str], now: date) -> Hit:
    unit = m.group("u").lower()
    if m.group("w").lower() == "this":
        if unit == "week":
            return _hit(m, (monday_of(now), now))
        if unit == "month":
            return _hit(m, (now.replace(day=1), now))
        return _hit(m, (date(now.year, 1, 1), now))
    if unit == "week":
        monday = monday_of(now) + timedelta(days=7)
        return _hit(m, (monday, monday + timedelta(days=6)))
    if unit == "month":
        return _hit(m, month_window(*add_months(now.year, now.month, 1)))
    return _hit(m, year_window(now.year + 1))


@_rule(r"\b(?:(?P<w>last|this|next|the|past) )?weekend\b")
def _weekend(m: re.Match[str], now: date) -> Hit | None:
    which = (m.group("w") or "").lower()
    if not which:
        return None
    saturday = monday_of(now) + timedelta(days=5)
    if which in ("last", "past"):
        saturday -= timedelta(days=7)
    elif which == "next":
        saturday += timedelta(days=7)
    elif which == "the" and saturday > now:
        saturday -= timedelta(days=7)
    return _hit(m, (saturday, saturday + timedelta(days=1)))


@_rule(
    r"\b(?:(?P<w>last|this|next|on|every|past) )?"
    r"(?P<d>monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?P<pl>s)?\b"
)
def _weekday(m: re.Match[str], now: date) -> Hit | None:
    which = (m.group("w") or "").lower()
    if which == "every" or m.group("pl"):
        return None
    target = WEEKDAY_NUM[m.group("d").lower()]
    if which == "this":
        day = monday_of(now) + timedelta(days=target)
    elif which == "next":
        day = next_weekday(now, target)
    else:
        day = previous_weekday(now, target)
    return _hit(m, (day, day), rank=2)


def previous_weekday(day: date, weekday: int) -> date:
    """The latest ``weekday`` (0 = Monday) strictly before ``day``."""
    return day - timedelta(days=(day.weekday() - weekday) % 7 or 7)


def next_weekday(day: date, weekday: int) -> date:
    """The first ``weekday`` (0 = Monday) strictly after ``day``."""
    return day + timedelta(days=(weekday - day.weekday()) % 7 or 7)


@lru_cache(maxsize=256)
def _month_day_occurrence(month: int, day: int) -> Occurrence:
    def occurrence(year: int) -> Window:
        d = date(year, month, day)
        return d, d

    return occurrence


def _month_day_hit(m: re.Match[str], now: date) -> Hit | None:
    month = _MONTH_NUM[m.group("m").lower()]
    day = int(m.group("d"))
    if not 1 <= day <= 31:
        return None
    year = int(m.group("y")) if m.group("y") else None
    return _occurrence_hit(m, _month_day_occurrence(month, day), now, year=year, rank=0)


_rule(
    r"\b(?P<m>" + _M_ALL + r")\b\.? (?:the )?(?P<d>\d{1,2})(?:st|nd|rd|th)?\b(?!:)"
    r"(?:,? (?P<y>\d{4})\b)?"
)(_month_day_hit)
_rule(
    r"\b(?:the )?(?P<d>\d{1,2})(?:st|nd|rd|th)?(?: of)? (?P<m>" + _M_ALL + r")\b\.?"
    r"(?:,? (?P<y>\d{4})\b)?"
)(_month_day_hit)


@_rule(r"\bon the (?P<d>\d{1,2})(?:st|nd|rd|th)\b(?! of\b)")
def _on_the_nth(m: re.Match[str], now: date) -> Hit | None:
    day = int(m.group("d"))
    if not 1 <= day <= 31:
        return None
    year, month = now.year, now.month
    for _ in range(12):
        if day <= monthrange(year, month)[1] and date(year, month, day) <= now:
            d = date(year, month, day)
            return _hit(m, (d, d), rank=0)
        year, month = add_months(year, month, -1)
    return None


def _part_of_month(year: int, month: int, part: str) -> Window:
    start, end = month_window(year, month)
    if part == "early":
        return start, start.replace(day=10)
    if part == "mid":
        return start.replace(day=11), start.replace(day=20)
    if part == "late":
        return start.replace(day=21), end
    return start, end


@lru_cache(maxsize=256)
def _month_occurrence(month: int, part: str) -> Occurrence:
    return lambda year: _part_of_month(year, month, part)


@_rule(r"\b(?:(?P<q>early|mid|late)[ -])?(?P<m>" + _M_ALL + r")\b\.?,? (?:of )?(?P<y>\d{4})\b")
def _month_year(m: re.Match[str], now: date) -> Hit:
    year = int(m.group("y"))
    month = _MONTH_NUM[m.group("m").lower()]
    hit = _hit(m, _part_of_month(year, month, (m.group("q") or "").lower()))
    hit.year = year
    return hit


_MONTH_PRE = "in|last|this|next|of|since|before|after|until|till|from|between|during|early|mid|late"


@_rule(
    r"\b(?P<pre>" + _MONTH_PRE + r")[ -](?:the )?(?:(?P<q>early|mid|late)[ -])?"
    r"(?P<m>" + _M_FULL + r")\b(?P<poss>')?(?!\.?,? (?:of |the )?\d)"
)
def _month_qualified(m: re.Match[str], now: date) -> Hit | None:
    name = m.group("m").lower()
    pre = m.group("pre").lower()
    if m.group("poss"):
        return None
    if name in _AMBIGUOUS_MONTHS and pre in ("this", "in", "of"):
        after = m.string[m.end() : m.end() + 2]
        if after.startswith(" ") and not after[1:].isdigit():
            word = re.match(r" ([a-z]+)", m.string[m.end() : m.end() + 16], FLAGS)
            if word is None or word.group(1).lower() not in _MONTH_FOLLOWERS:
                return None
    part = (m.group("q") or (pre if pre in ("early", "mid", "late") else "")).lower()
    occurrence = _month_occurrence(_MONTH_NUM[name], part)
    mode = pre if pre in ("last", "this", "next") else "in"
    hit = _occurrence_hit(m, occurrence, now, mode=mode, core=None if mode != "in" else "m")
    if hit is not None and mode == "in" and pre not in ("early", "mid", "late"):
        hit.start = m.start("q") if m.group("q") else m.start("m")
    return hit


@_rule(r"\b(?P<m>" + _M_BARE + r")\b(?!')")
def _month_bare(m: re.Match[str], now: date) -> Hit | None:
    return _occurrence_hit(m, _month_occurrence(_MONTH_NUM[m.group("m").lower()], ""), now)


@lru_cache(maxsize=256)
def _season_occurrence(season: str, part: str) -> Occurrence:
    first = _SEASON_MONTH[season]
    offset = {"early": 0, "mid": 1, "late": 2}.get(part)

    def occurrence(year: int) -> Window:
        if offset is not None:
            return month_window(*add_months(year, first, offset))
        start = month_window(year, first)[0]
        return start, month_window(*add_months(year, first, 2))[1]

    return occurrence


@_rule(
    r"\b(?:(?P<pre>last|this|next|past|in|during|over|since|before|after|until|till|from|"
    r"between|through)(?P<the> the)? )?(?:(?P<q>early|mid|late)[ -])?"
    r"(?P<s>spring|summer|autumn|fall|winter)\b(?:,? (?:of )?(?P<y>\d{4})\b)?"
)
def _season(m: re.Match[str], now: date) -> Hit | None:
    season = m.group("s").lower()
    pre = (m.group("pre") or "").lower()
    year = m.group("y")
    if not (pre or year or m.group("q")):
        return None
    if (
        season in ("spring", "fall")
        and not year
        and not m.group("q")
        and not m.group("the")
        and pre not in ("last", "this", "next", "past")
    ):
        return None
    occurrence = _season_occurrence(season, (m.group("q") or "").lower())
    mode = {"past": "last"}.get(pre, pre) if pre in ("last", "this", "next", "past") else "in"
    core = None if mode != "in" else ("q" if m.group("q") else "s")
    named = int(year) if year else None
    return _occurrence_hit(m, occurrence, now, mode=mode, year=named, core=core)


_HOLIDAYS = (
    r"christmas eve|christmas day|christmas|xmas|new years?'?s? eve|new years?'?s? day|"
    r"new years?'?s?|halloween|valentines?'?s?(?: day)?|thanksgiving|easter sunday|"
    r"easter monday|easter|good friday|independence day|fourth of july"
)


@_rule(
    r"\b(?:(?P<pre>last|this|next|on|at|over|for|since|before|after|until|till|from|between|"
    r"during|around|by)(?: the)? )?(?P<h>" + _HOLIDAYS + r")(?![a-z0-9'])(?:,? (?P<y>\d{4})\b)?"
)
def _holiday(m: re.Match[str], now: date) -> Hit | None:
    occurrence = holiday_occurrence(m.group("h"))
    pre = (m.group("pre") or "").lower()
    mode = pre if pre in ("last", "this", "next") else "in"
    core = None if mode != "in" else "h"
    year = int(m.group("y")) if m.group("y") else None
    return _occurrence_hit(m, occurrence, now, mode=mode, year=year, core=core)


def _exact(m: re.Match[str], year: int, month: int, day: int) -> Hit:
    d = date(year, month, day)
    hit = _hit(m, (d, d), rank=0)
    hit.year = year
    return hit


@_rule(r"\b(?P<y>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})\b")
def _iso_date(m: re.Match[str], now: date) -> Hit:
    return _exact(m, int(m.group("y")), int(m.group("m")), int(m.group("d")))


@_rule(r"\b(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})\b")
def _us_date(m: re.Match[str], now: date) -> Hit:
    return _exact(m, int(m.group("y")), int(m.group("m")), int(m.group("d")))


@_rule(r"\b(?P<y>\d{4})-(?P<m>\d{2})\b(?![-/]\d)")
def _iso_month(m: re.Match[str], now: date) -> Hit:
    year = int(m.group("y"))
    hit = _hit(m, month_window(year, int(m.group("m"))), rank=0)
    hit.year = year
    return hit


_UNITS = (
    r"(?:px|pt|ms|s|kb|mb|gb|k|m|tokens?|dims?|dimensions|bytes|bits|items|rows|words|chars|"
    r"characters|lines|times|users|files|calories|kcal|steps|dollars|euros|points|people)"
)


@_rule(
    r"\b(?P<pre>in|during|since|before|after|until|till|from|between|by|around|circa|"
    r"throughout|of|and|to|through)(?: the year)? (?P<y>\d{4})\b(?![-/.:]\d)(?! ?" + _UNITS + r"\b)"
)
def _year(m: re.Match[str], now: date) -> Hit | None:
    year = int(m.group("y"))
    if not 1800 <= year <= now.year + 10:
        return None
    hit = _hit(m, year_window(year), core="y")
    hit.year = year
    return hit


@_rule(r"\b(?P<q>early|mid|late)[ -](?P<y>\d{4})\b(?![-/.:]\d)")
def _part_of_year(m: re.Match[str], now: date) -> Hit:
    year = int(m.group("y"))
    first = {"early": 1, "mid": 5, "late": 9}[m.group("q")]
    hit = _hit(m, (date(year, first, 1), month_window(year, first + 3)[1]))
    hit.year = year
    return hit


@_rule(r"\b(?:(?P<the>the )(?P<short>\d)0|(?P<long>\d{3})0)'?s\b")
def _decade(m: re.Match[str], now: date) -> Hit | None:
    if m.group("long"):
        start = int(m.group("long")) * 10
        if not 1800 <= start <= now.year:
            return None  # "1000s of files" is a count
    else:
        start = int(m.group("short")) * 10 + now.year // 100 * 100
        if start > now.year:
            start -= 100
    return _hit(m, (date(start, 1, 1), date(start + 9, 12, 31)))
