"""The calendar under time phrases: month and year windows, yearly periods resolved against
today ("last Christmas", "this summer"), Easter and Thanksgiving."""

from __future__ import annotations

from calendar import monthrange
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from functools import lru_cache

Window = tuple[date, date]
#: A yearly period: the window it covers in a given year.
Occurrence = Callable[[int], Window]


def easter_sunday(year: int) -> date:
    """Western Easter Sunday by the anonymous Gregorian algorithm."""
    a = year % 19
    b, c = divmod(year, 100)
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    weekday = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * weekday) // 451
    month, day = divmod(h + weekday - 7 * m + 114, 31)
    return date(year, month, day + 1)


def thanksgiving(year: int) -> date:
    """US Thanksgiving: the fourth Thursday of November."""
    first = date(year, 11, 1)
    return first + timedelta(days=(3 - first.weekday()) % 7 + 21)


def month_window(year: int, month: int) -> Window:
    return date(year, month, 1), date(year, month, monthrange(year, month)[1])


def add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + delta
    return index // 12, index % 12 + 1


def shift_months(day: date, delta: int) -> date:
    year, month = add_months(day.year, day.month, delta)
    return date(year, month, min(day.day, monthrange(year, month)[1]))


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


def year_window(year: int) -> Window:
    return date(year, 1, 1), date(year, 12, 31)


def occurrences(occurrence: Occurrence, labels: range) -> Iterator[tuple[int, Window]]:
    """(label, window) for each label whose occurrence exists (Feb 29 needs a leap year)."""
    for label in labels:
        try:
            yield label, occurrence(label)
        except (ValueError, OverflowError):
            continue


@lru_cache(maxsize=4096)
def resolve(occurrence: Occurrence, mode: str, now: date) -> Window | None:
    """Pick an occurrence of a yearly period by the module's occurrence rules."""
    if mode == "this":
        found = list(occurrences(occurrence, range(now.year - 1, now.year + 2)))
        for _, (start, end) in found:
            if start <= now <= end:
                return start, end
        return next((w for label, w in found if label == now.year), None)
    if mode == "next":
        upcoming = occurrences(occurrence, range(now.year - 1, now.year + 10))
        return next((w for _, w in upcoming if w[0] > now), None)
    past = occurrences(occurrence, range(now.year + 1, now.year - 10, -1))
    if mode == "last":
        return next((w for _, w in past if w[1] < now), None)
    return next((w for _, w in past if w[0] <= now), None)


# -- holidays --


@lru_cache(maxsize=256)
def fixed_day(month: int, day: int) -> Occurrence:
    def occurrence(year: int) -> Window:
        d = date(year, month, day)
        return d, d

    return occurrence


def christmas(year: int) -> Window:
    return date(year, 12, 24), date(year, 12, 26)


def new_year(year: int) -> Window:
    return date(year - 1, 12, 31), date(year, 1, 1)


def easter(year: int) -> Window:
    sunday = easter_sunday(year)
    return sunday - timedelta(days=2), sunday + timedelta(days=1)


@lru_cache(maxsize=256)
def easter_day(offset: int) -> Occurrence:
    def occurrence(year: int) -> Window:
        d = easter_sunday(year) + timedelta(days=offset)
        return d, d

    return occurrence


def thanksgiving_day(year: int) -> Window:
    d = thanksgiving(year)
    return d, d


def holiday_occurrence(name: str) -> Occurrence:
    name = name.lower().replace("'", "")
    if name == "christmas eve":
        return fixed_day(12, 24)
    if name == "christmas day":
        return fixed_day(12, 25)
    if name in ("christmas", "xmas"):
        return christmas
    if name.startswith("new year") and name.endswith("eve"):
        return fixed_day(12, 31)
    if name.startswith("new year") and name.endswith("day"):
        return fixed_day(1, 1)
    if name.startswith("new year"):
        return new_year
    if name == "halloween":
        return fixed_day(10, 31)
    if name.startswith("valentine"):
        return fixed_day(2, 14)
    if name == "thanksgiving":
        return thanksgiving_day
    if name == "easter sunday":
        return easter_day(0)
    if name == "easter monday":
        return easter_day(1)
    if name == "good friday":
        return easter_day(-2)
    if name == "easter":
        return easter
    return fixed_day(7, 4)  # independence day, fourth of july
