"""Time intent parsing: windows, current-state markers and tense, table-driven plus fuzzing."""

from __future__ import annotations

import time
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.engine.temporal import TimeIntent, easter_sunday, parse_time_intent, thanksgiving

WED = date(2024, 6, 12)  # a Wednesday in a leap year
OPEN = date.min


def d(iso: str) -> date:
    return date.fromisoformat(iso)


def w(start: str, end: str | None = None) -> tuple[date, date]:
    return d(start), d(end or start)


# (query, now, expected window, current, present_tense)
CASES: list[tuple[str, date, tuple[date, date] | None, bool, bool]] = [
    # days
    ("what did I do yesterday", WED, w("2024-06-11"), False, False),
    ("what did I do today", WED, w("2024-06-12"), False, False),
    ("what do I use today", WED, None, True, True),
    ("what is on my list for today", WED, w("2024-06-12"), False, True),
    ("what was I working on the day before yesterday", WED, w("2024-06-10"), False, False),
    ("what happened two days ago", WED, w("2024-06-10"), False, False),
    ("what did I eat 3 days ago", WED, w("2024-06-09"), False, False),
    ("a day ago", WED, w("2024-06-11"), False, False),
    ("something a few days ago", WED, w("2024-06-08", "2024-06-10"), False, False),
    ("a couple of days ago", WED, w("2024-06-09", "2024-06-11"), False, False),
    ("what did I cook last night", WED, w("2024-06-11"), False, False),
    ("yesterday", date(2024, 3, 1), w("2024-02-29"), False, False),
    ("yesterday", date(2023, 3, 1), w("2023-02-28"), False, False),
    # weeks
    ("what did I do last week", WED, w("2024-06-03", "2024-06-09"), False, False),
    ("last week", date(2025, 1, 2), w("2024-12-23", "2024-12-29"), False, False),
    ("this week", WED, w("2024-06-10", "2024-06-12"), False, False),
    ("the past week", WED, w("2024-06-05", "2024-06-12"), False, False),
    ("two weeks ago", WED, w("2024-05-27", "2024-06-02"), False, False),
    ("a week ago", WED, w("2024-06-03", "2024-06-09"), False, False),
    ("last weekend", WED, w("2024-06-08", "2024-06-09"), False, False),
    ("last weekend", date(2024, 6, 16), w("2024-06-08", "2024-06-09"), False, False),
    ("this weekend", WED, w("2024-06-15", "2024-06-16"), False, False),
    ("last Monday", WED, w("2024-06-10"), False, False),
    ("what did I do on Tuesday", WED, w("2024-06-11"), False, False),
    ("on Wednesday", WED, w("2024-06-05"), False, False),
    ("I go swimming every Monday", WED, None, False, False),
    ("in the last 3 days", WED, w("2024-06-09", "2024-06-12"), False, False),
    ("over the past two weeks", WED, w("2024-05-29", "2024-06-12"), False, False),
    # months
    ("this month", WED, w("2024-06-01", "2024-06-12"), False, False),
    ("last month", WED, w("2024-05-01", "2024-05-31"), False, False),
    ("last month", date(2024, 1, 15), w("2023-12-01", "2023-12-31"), False, False),
    ("3 months ago", WED, w("2024-03-01", "2024-03-31"), False, False),
    ("what happened in May", WED, w("2024-05-01", "2024-05-31"), False, False),
    ("where did we go in July", WED, w("2023-07-01", "2023-07-31"), False, False),
    ("what did I do in March?", WED, w("2024-03-01", "2024-03-31"), False, False),
    ("in may, I moved", WED, w("2024-05-01", "2024-05-31"), False, False),
    ("in May 2023", WED, w("2023-05-01", "2023-05-31"), False, False),
    ("May 2023", WED, w("2023-05-01", "2023-05-31"), False, False),
    ("last December", date(2025, 1, 15), w("2024-12-01", "2024-12-31"), False, False),
    ("last May", date(2024, 5, 20), w("2023-05-01", "2023-05-31"), False, False),
    ("early May", WED, w("2024-05-01", "2024-05-10"), False, False),
    ("mid-May 2023", WED, w("2023-05-11", "2023-05-20"), False, False),
    ("late February 2024", WED, w("2024-02-21", "2024-02-29"), False, False),
    ("late February 2023", WED, w("2023-02-21", "2023-02-28"), False, False),
    ("on May 5", WED, w("2024-05-05"), False, False),
    ("May 5th", WED, w("2024-05-05"), False, False),
    ("5 May 2023", WED, w("2023-05-05"), False, False),
    ("the 5th of May", WED, w("2024-05-05"), False, False),
    ("on July 4", WED, w("2023-07-04"), False, False),
    ("2023-05-08", WED, w("2023-05-08"), False, False),
    ("see memory/2023-05-08.md", WED, w("2023-05-08"), False, False),
    ("05/08/2023", WED, w("2023-05-08"), False, False),
    ("what did I do on Feb 29", date(2025, 6, 1), w("2024-02-29"), False, False),
    ("Feb 29 2023", WED, None, False, False),
    # years
    ("this year", WED, w("2024-01-01", "2024-06-12"), False, False),
    ("last year", WED, w("2023-01-01", "2023-12-31"), False, False),
    ("what did I build in 2023", WED, w("2023-01-01", "2023-12-31"), False, False),
    ("two years ago", WED, w("2022-01-01", "2022-12-31"), False, False),
    ("late 2023", WED, w("2023-09-01", "2023-12-31"), False, False),
    ("back in the 90s", WED, w("1990-01-01", "1999-12-31"), False, False),
    ("the 2010s", WED, w("2010-01-01", "2019-12-31"), False, False),
    ("in my 20s", WED, None, False, False),
    ("1000s of files", WED, None, False, False),
    # seasons
    ("last summer", WED, w("2023-06-01", "2023-08-31"), False, False),
    ("last summer", date(2024, 9, 10), w("2024-06-01", "2024-08-31"), False, False),
    ("this summer", WED, w("2024-06-01", "2024-08-31"), False, False),
    ("last winter", WED, w("2023-12-01", "2024-02-29"), False, False),
    ("last winter", date(2025, 1, 10), w("2023-12-01", "2024-02-29"), False, False),
    ("last fall", WED, w("2023-09-01", "2023-11-30"), False, False),
    ("in the spring of 2023", WED, w("2023-03-01", "2023-05-31"), False, False),
    # holidays
    ("last Christmas", date(2026, 12, 25), w("2025-12-24", "2025-12-26"), False, False),
    ("last Christmas", date(2026, 12, 26), w("2025-12-24", "2025-12-26"), False, False),
    ("Christmas 2023", WED, w("2023-12-24", "2023-12-26"), False, False),
    ("this Christmas", WED, w("2024-12-24", "2024-12-26"), False, False),
    ("Christmas Eve", WED, w("2023-12-24"), False, False),
    ("New Year\u2019s Eve", WED, w("2023-12-31"), False, False),
    ("New Year", date(2024, 1, 1), w("2023-12-31", "2024-01-01"), False, False),
    ("Halloween", WED, w("2023-10-31"), False, False),
    ("Valentine's Day", WED, w("2024-02-14"), False, False),
    ("Thanksgiving 2023", WED, w("2023-11-23"), False, False),
    ("Easter 2024", WED, w("2024-03-29", "2024-04-01"), False, False),
    ("Easter 2025", WED, w("2025-04-18", "2025-04-21"), False, False),
    ("Easter Sunday", date(2025, 5, 1), w("2025-04-20"), False, False),
    ("Fourth of July", WED, w("2023-07-04"), False, False),
    # vague, open-ended, ranges, several expressions
    ("recently", WED, None, True, False),
    ("what have I been doing lately", WED, None, True, True),
    (
        "what did we do the weekend before 4th October, 2023",
        WED,
        w("2023-09-30", "2023-10-04"),
        False,
        False,
    ),
    ("the Monday before July 24, 2023", WED, w("2023-07-17", "2023-07-24"), False, False),
    (
        "plans for the Saturday after October 28, 2023?",
        WED,
        w("2023-10-28", "2023-11-04"),
        False,
        False,
    ),
    ("how many pets as of September 2023", WED, w("0001-01-01", "2023-09-30"), False, False),
    ("I saw him the other day", WED, w("2024-05-29", "2024-06-12"), False, False),
    ("since May 2023", WED, w("2023-05-01", "2024-06-12"), False, False),
    ("after May 2023", WED, w("2023-06-01", "2024-06-12"), False, False),
    ("before 2020", WED, (OPEN, d("2019-12-31")), False, False),
    ("until last year", WED, (OPEN, d("2023-12-31")), False, False),
    ("since Christmas", WED, w("2023-12-24", "2024-06-12"), False, False),
    ("between May and July 2023", WED, w("2023-05-01", "2023-07-31"), False, False),
    ("from June to August 2023", WED, w("2023-06-01", "2023-08-31"), False, False),
    ("between 2021 and 2023", WED, w("2021-01-01", "2023-12-31"), False, False),
    ("last week or maybe in 2023", WED, w("2024-06-03", "2024-06-09"), False, False),
    ("LAST WEEK", WED, w("2024-06-03", "2024-06-09"), False, False),
    # current state and tense, no window
    ("which editor do I use", WED, None, False, True),
    ("where do I live", WED, None, False, True),
    ("what is my favourite colour", WED, None, False, True),
    ("what does Caroline do for work", WED, None, False, True),
    ("where did I live", WED, None, False, False),
    ("which editor do I use now", WED, None, True, True),
    ("what am I currently reading", WED, None, True, True),
    ("do I still play tennis", WED, None, True, True),
    ("what's my latest project", WED, None, True, True),
    ("which phone do I have these days", WED, None, True, True),
    ("I don't use vim anymore", WED, None, True, True),
    ("is my address up to date", WED, None, True, True),
    ("as of today, where does Sam work", WED, None, True, True),
    # negatives: words that look like time but are not
    ("May I ask what my favourite colour is?", WED, None, False, True),
    ("Summarise the fallback design", WED, None, False, False),
    ("march the tests forward", WED, None, False, False),
    ("this may be wrong", WED, None, False, False),
    ("You may want to check the summary", WED, None, False, False),
    ("I talked to Mayo about maybe weekly summaries", WED, None, False, False),
    ("how do I spring-load the config", WED, None, False, True),
    ("on the last day of the trip", WED, None, False, False),
    ("use a window in 2048 tokens", WED, None, False, False),
    ("what port is 2023", WED, None, False, True),
    ("June's new car", WED, None, False, False),
]


@pytest.mark.parametrize(("query", "now", "window", "current", "present"), CASES)
def test_parse_time_intent(
    query: str, now: date, window: tuple[date, date] | None, current: bool, present: bool
) -> None:
    intent = parse_time_intent(query, now)
    assert intent.window == window, intent
    assert intent.current is current, intent
    assert intent.present_tense is present, intent


def test_table_is_large() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(
    ("query", "phrase"),
    [
        ("what did I do since May 2023?", "since May 2023"),
        ("trip between May and July 2023", "between May and July 2023"),
        ("what happened in May", "in May"),
        ("what do I use today", "today"),
        ("which editor do I use right now", "right now"),
        ("nothing here", None),
    ],
)
def test_phrase(query: str, phrase: str | None) -> None:
    assert parse_time_intent(query, WED).phrase == phrase


def test_to_json() -> None:
    intent = parse_time_intent("what did I do last week", WED)
    assert intent.to_json() == {
        "current": False,
        "present_tense": False,
        "window": ["2024-06-03", "2024-06-09"],
        "phrase": "last week",
        "past_state": False,
        "first_person": True,
    }
    assert parse_time_intent("hello", WED).to_json()["window"] is None


def test_shortest_window_wins() -> None:
    intent = parse_time_intent("in 2023, or maybe last week, around Christmas", WED)
    assert intent.window == w("2023-12-24", "2023-12-26")
    assert intent.phrase == "around Christmas"
    # equal lengths: the explicit date beats the relative weekday
    assert parse_time_intent("on Monday, May 6", WED).window == w("2024-05-06")


def test_calendar_helpers() -> None:
    assert easter_sunday(2024) == d("2024-03-31")
    assert easter_sunday(2025) == d("2025-04-20")
    assert easter_sunday(2000) == d("2000-04-23")
    assert easter_sunday(2038) == d("2038-04-25")  # latest possible date
    assert thanksgiving(2023) == d("2023-11-23")
    assert thanksgiving(2024) == d("2024-11-28")


_WORDS = (
    "last this next in on at since before after until between and to from the of a few couple "
    "several day days week weeks month months year years ago weekend monday sunday may march "
    "june december spring summer fall winter christmas easter new year's eve thanksgiving "
    "early mid late today yesterday tomorrow recently now still 5 5th 29 31 2023 1900 2100 "
    "9999 0000 02/29/2024 2023-02-29 2024-13-01 - , ? did do is"
).split()


@settings(max_examples=300, deadline=None)
@given(query=st.text(max_size=200), now=st.dates(date(1900, 1, 1), date(2100, 12, 31)))
def test_never_raises_on_any_text(query: str, now: date) -> None:
    _check(parse_time_intent(query, now))


@settings(max_examples=500, deadline=None)
@given(
    words=st.lists(st.sampled_from(_WORDS), max_size=12),
    now=st.dates(date(1900, 1, 1), date(2100, 12, 31)),
)
def test_never_raises_on_time_words(words: list[str], now: date) -> None:
    _check(parse_time_intent(" ".join(words), now))


def _check(intent: TimeIntent) -> None:
    assert isinstance(intent.current, bool)
    assert isinstance(intent.present_tense, bool)
    if intent.window is not None:
        assert intent.window[0] <= intent.window[1]
        assert intent.phrase
    intent.to_json()


@pytest.mark.parametrize(
    "unit",
    [
        "a",
        " ",
        "1",
        "last ",
        "in may ",
        "1/1/",
        "2023-",
        "between ",
        "today ",
        "the day before yesterday ",
        "5 may 2023 ",
        "between May and July 2023 ",
        "a few a few ",
        "new year's ",
        "on the 5th ",
        "last summer since ",
    ],
)
def test_large_query_is_fast(unit: str) -> None:
    query = (unit * (100_000 // len(unit) + 1))[:100_000]
    started = time.perf_counter()
    intent = parse_time_intent(query, WED)
    assert time.perf_counter() - started < 3.0
    _check(intent)


@pytest.mark.parametrize(
    ("query", "past"),
    [
        ("what editor did I use before Zed?", True),
        ("what was my old dog's name?", True),
        ("where did I use to live?", True),
        ("what was the original launch date?", True),
        ("which editor do I use now?", False),
        ("what is my dog called?", False),
    ],
)
def test_past_state(query: str, past: bool) -> None:
    assert parse_time_intent(query, WED).past_state is past


@pytest.mark.parametrize(
    ("query", "mine"),
    [
        ("who is my manager?", True),
        ("which editor do I use?", True),
        ("what does Melanie do to relax?", False),
        ("where is tidepool hosted?", False),
    ],
)
def test_first_person(query: str, mine: bool) -> None:
    assert parse_time_intent(query, WED).first_person is mine
