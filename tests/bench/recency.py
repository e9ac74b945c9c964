"""Knowledge-update and time-awareness benchmark of memory search (shipped defaults).

Usage::

    .venv/bin/python tests/bench/recency.py [--verbose] [--json] [--workdir DIR] [--only ID]

Protocol
--------
Three simulated users ("personas") each get one realistic workspace: a ``MEMORY.md`` of
evergreen facts and a year or more of daily logs ``memory/YYYY-MM-DD.md`` written the way the
app writes them (a ``# YYYY-MM-DD`` title, bullets, sometimes under ``## Daily Summary`` or a
``## HH:MM · title · messages a–b`` session heading). The logs mix a persona's *story entries*
(hand-written, dated facts that change over time: editor, city, job, dog, manager, CI, ...)
with *filler* about unrelated developer life (projects, meetings, bugs, food, travel, reading,
exercise, admin, friends), generated deterministically from a seed, so each target has to be
found among ~200-300 entries. Nothing here knows how the engine ranks: the cases are what a
user would ask, labelled by hand.

Every case is a question asked with ``engine.search(question, now=...)`` and nothing else
(every other option is the shipped default, so a default ``max_results`` or ``min_score`` that
drops the answer counts against it). The expected entry is named by a marker substring that
occurs exactly once in the persona's files; a result *hits* when it is in that file and its
``[start_line, end_line]`` covers the marker's line (a chunk holding a whole day's log counts).
``rivals`` name the conflicting or look-alike entries, for the data checks and the report only.

Categories and what counts as a pass:

* ``current-state``: an older fact and a newer replacement in dated logs ("Uses Vim for
  everything" → "Switched from Vim to Zed"); the question asks for the present state. Pass:
  the newer entry is the top-1 result. The wording is varied so that in about half the cases
  the newer entry does not share more question keywords than the older one; the table splits
  the category on that (a plain lowercase-word overlap, :func:`shared_terms`).
* ``history``: a question about an old state or event that has newer look-alikes ("which editor
  did I use before Zed?", "the first bug we fixed in Harbor"). Pass: the old entry in the top 3.
* ``time-anchored``: a question with a time expression ("yesterday", "last week", "two weeks
  ago", "in May 2026", "last Christmas", "on my birthday in March") and same-topic entries on
  other dates. Pass: the entry from that window in the top 3.
* ``control``: the answer is old and nothing newer conflicts with it; recency handling must not
  bury it. Pass: top 3.
* ``memory-vs-log``: ``MEMORY.md`` holds the fact ("Drinks two espressos every morning",
  hand-written or saved with a date), a daily log tells of the change later ("Gave up espresso
  … green tea every morning now"); the question asks for the present state. Pass: the log entry
  is the top-1 result. In real use this is the common case: facts live in MEMORY.md, changes
  are told in conversation and land in the daily log.

The table reports, per category, n, top-1, top-3 (and how many targets were returned at all).
The exit status is 0 whatever the scores. The data is checked before anything runs (markers
unique, dates ordered as the category needs); ``tests/test_recency_bench_data.py`` runs the same
checks without the model. ``--workdir`` keeps the workspaces, so a re-run embeds nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tui.engine.embeddings import Embedder
    from tui.engine.search import SearchResult

REPO = Path(__file__).resolve().parents[2]
# Run as a script, tests/bench is first on sys.path and its tui.py would shadow the package.
if str(REPO) not in sys.path[:1]:
    sys.path.insert(0, str(REPO))

#: How deep the ranking is read for the "top-100" column (every result, min_score 0).
DEPTH = 100

CURRENT = "current-state"
HISTORY = "history"
TIME = "time-anchored"
CONTROL = "control"
MEMORY_VS_LOG = "memory-vs-log"
CATEGORIES = (CURRENT, HISTORY, TIME, CONTROL, MEMORY_VS_LOG)
#: Minimum number of cases per category (the brief's floor).
MINIMUMS = {CURRENT: 16, HISTORY: 12, TIME: 12, CONTROL: 0, MEMORY_VS_LOG: 8}
#: The rank a case must reach to pass.
PASS_RANK = {CURRENT: 1, HISTORY: 3, TIME: 3, CONTROL: 3, MEMORY_VS_LOG: 1}

FILLER_KINDS = (
    "project",
    "meeting",
    "bug",
    "food",
    "travel",
    "reading",
    "exercise",
    "admin",
    "social",
)


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class Entry:
    """A hand-written story entry: one bullet in the daily log of ``day``."""

    day: date
    text: str


@dataclass(frozen=True)
class Case:
    """One labelled question."""

    id: str
    category: str
    question: str
    #: Marker substrings of the accepted entries (any one of them passes).
    targets: tuple[str, ...]
    #: Markers of the conflicting / look-alike entries (not used for scoring).
    rivals: tuple[str, ...] = ()
    #: time-anchored only: the dates the question's time expression names (inclusive).
    window: tuple[date, date] | None = None
    #: time-anchored only: filler kinds kept out of ``quiet_span`` (or the window) so that the
    #: story entry is the only same-topic entry there.
    quiet: tuple[str, ...] = ()
    quiet_span: tuple[date, date] | None = None
    note: str = ""


@dataclass(frozen=True)
class Vocab:
    """A persona's filler vocabulary."""

    projects: tuple[str, ...]
    bug_projects: tuple[str, ...]
    colleagues: tuple[str, ...]
    friends: tuple[str, ...]
    family: tuple[str, ...]


@dataclass(frozen=True)
class Persona:
    """One user: one workspace, one ``now`` for all their questions."""

    name: str
    seed: int
    start: date
    now: date
    memory_md: str
    stories: tuple[Entry, ...]
    cases: tuple[Case, ...]
    vocab: Vocab


def d(text: str) -> date:
    return date.fromisoformat(text)


def parse_stories(block: str) -> tuple[Entry, ...]:
    """``YYYY-MM-DD  text`` lines; an indented line continues the entry above it."""
    entries: list[tuple[date, str]] = []
    for line in block.strip("\n").splitlines():
        if line[:1].isspace():
            day, text = entries[-1]
            entries[-1] = (day, f"{text} {line.strip()}")
        elif line.strip():
            day_text, text = line.split(None, 1)
            entries.append((date.fromisoformat(day_text), text.strip()))
    return tuple(Entry(day, text) for day, text in entries)


def window(start: str, end: str | None = None) -> tuple[date, date]:
    return (d(start), d(end or start))


# --------------------------------------------------------------------------- filler


PLACES = (
    "the Vietnamese place around the corner",
    "the new ramen bar",
    "the Georgian bakery",
    "the falafel stand by the station",
    "the canteen",
    "the Sichuan place",
    "the taco truck",
    "the Lebanese café",
    "the pizza place with the wood oven",
    "the noodle bar",
)
DISHES = (
    "mushroom risotto",
    "shakshuka",
    "red lentil dal",
    "pasta e fagioli",
    "a big Greek salad",
    "vegetable gyoza",
    "aubergine parmigiana",
    "black bean tacos",
    "miso soup with tofu",
    "spinach and ricotta cannelloni",
    "a chickpea curry",
    "potato and leek soup",
)
CITIES = (
    "Vienna",
    "Copenhagen",
    "Prague",
    "Milan",
    "Edinburgh",
    "Zurich",
    "Stockholm",
    "Ghent",
    "Kraków",
    "Valencia",
    "Bologna",
    "Rotterdam",
)
BOOKS = (
    "The Pragmatic Programmer",
    "Designing Data-Intensive Applications",
    "A Philosophy of Software Design",
    "Klara and the Sun",
    "The Left Hand of Darkness",
    "Sapiens",
    "The Mythical Man-Month",
    "Children of Time",
    "Tomorrow, and Tomorrow, and Tomorrow",
    "The Overstory",
)
BUG_CAUSES = (
    "a race between two goroutines writing the same map",
    "an off-by-one in the pagination cursor",
    "a timezone conversion that assumed UTC",
    "a cache key missing the tenant id",
    "a retry loop without backoff",
    "an unclosed file handle in the uploader",
    "a regex that choked on emoji",
    "integer overflow in the byte counter",
    "a stale feature flag",
    "a missing index on the audit table",
)
RETRO_POINTS = (
    "too many unplanned requests",
    "reviews are taking too long",
    "on-call handover needs a checklist",
    "we should write smaller tickets",
    "the release train worked well",
    "flaky tests are eating our time",
)
ALLHANDS = (
    "the hiring plan",
    "the new expense policy",
    "Q3 goals",
    "the office move",
    "security training",
    "the engineering ladder",
)
SESSION_TITLES = (
    "Quick question",
    "Catch-up",
    "Check-in",
    "Chat",
    "Notes",
    "Catching up",
    "Planning",
    "Brain dump",
    "Questions",
    "Thinking out loud",
)


WORK_DONE = (
    "cleaned up the config loading",
    "split the handler into smaller functions",
    "added metrics for queue depth",
    "wrote the migration plan",
    "reviewed three pull requests",
    "paired on the API schema",
)
ROLES = ("senior backend", "data", "SRE", "frontend")
BOOK_NOTES = ("slow going", "really good so far", "a chapter a night", "not sure about it yet")
CHAT_TOPICS = ("their new job", "climbing trips", "the housing market", "a podcast idea")


def filler_entry(kind: str, rng: random.Random, v: Vocab) -> str:
    """One bullet of unrelated developer life."""
    c = rng.choice
    n = rng.randint
    options: tuple[str, ...]
    if kind == "project":
        options = (
            f"Worked on {c(v.projects)}: {c(WORK_DONE)}",
            f"Got the {c(v.projects)} refactor past review after {n(2, 5)} rounds",
            f"Wrote a design doc for {c(v.projects)}; {c(v.colleagues)} had good questions",
            f"Deployed a new version of {c(v.projects)} with no drama",
        )
    elif kind == "meeting":
        options = (
            f"Retro: {c(RETRO_POINTS)}",
            "Quarterly planning ran over by an hour again",
            f"All-hands about {c(ALLHANDS)}",
            f"Interviewed a candidate for the {c(ROLES)} role",
            f"Long sync with {c(v.colleagues)} about {c(v.projects)} ownership",
            "Standup ran long because of a production alert",
        )
    elif kind == "bug":
        options = (
            f"Tracked down a flaky test in {c(v.bug_projects)}: {c(BUG_CAUSES)}",
            f"Fixed a bug in {c(v.bug_projects)} caused by {c(BUG_CAUSES)}",
            f"Spent the afternoon bisecting a regression in {c(v.bug_projects)}",
            f"Reviewed {c(v.colleagues)}'s fix for {c(BUG_CAUSES)}",
        )
    elif kind == "food":
        options = (
            f"Lunch at {c(PLACES)} with {c(v.colleagues)}",
            f"Cooked {c(DISHES)} for dinner",
            f"Tried a new recipe: {c(DISHES)}",
            f"Takeaway from {c(PLACES)}, too tired to cook",
            "Baked sourdough, the crumb was better this time",
        )
    elif kind == "travel":
        options = (
            f"Booked train tickets to {c(CITIES)} for a long weekend",
            f"Weekend trip to {c(CITIES)}; walked about {n(15, 28)} km",
            f"Flight to {c(CITIES)} delayed {n(1, 3)} hours",
            f"Looking at flights to {c(CITIES)} for the autumn",
        )
    elif kind == "reading":
        book = c(BOOKS)
        options = (
            f"Reading '{book}', {c(BOOK_NOTES)}",
            f"Finished '{book}'",
            f"Started '{book}' on the train",
        )
    elif kind == "exercise":
        options = (
            f"Ran {n(5, 12)} km along the river",
            "Yoga class in the evening, hips are tight",
            f"Climbing gym with {c(v.friends)}",
            f"Swam {n(20, 40)} lengths before work",
        )
    elif kind == "admin":
        options = (
            "Paid the electricity bill",
            "Dentist appointment moved to next month",
            "Renewed the gym membership",
            "Sorted out the tax return paperwork",
            "Cancelled two streaming subscriptions",
            "Called the bank about a double charge",
        )
    else:
        options = (
            f"Drinks with {c(v.friends)} after work",
            f"Board game night at {c(v.friends)}'s place",
            f"Long call with {c(v.family)}",
            f"Helped {c(v.friends)} move flats",
            f"Coffee with {c(v.friends)}, talked about {c(CHAT_TOPICS)}",
        )
    return c(options)


def quiet_rules(persona: Persona) -> list[tuple[date, date, frozenset[str]]]:
    rules = []
    for case in persona.cases:
        if case.quiet:
            span = case.quiet_span or case.window
            assert span is not None, case.id
            rules.append((span[0], span[1], frozenset(case.quiet)))
    return rules


def generate_logs(persona: Persona) -> dict[date, list[str]]:
    """Bullets per day: the story entries plus seeded filler, up to the day before ``now``."""
    rng = random.Random(persona.seed)
    stories: dict[date, list[str]] = {}
    for entry in persona.stories:
        stories.setdefault(entry.day, []).append(entry.text)
    rules = quiet_rules(persona)
    days: dict[date, list[str]] = {}
    day = persona.start
    while day < persona.now:
        weekend = day.weekday() >= 5
        story = stories.get(day, [])
        if story:
            count = rng.choice((0, 0, 1, 1, 2))
        elif rng.random() < (0.2 if weekend else 0.34):
            count = rng.choice((1, 1, 1, 2, 2, 3))
        else:
            count = 0
        banned = frozenset().union(*(k for lo, hi, k in rules if lo <= day <= hi))
        kinds = [k for k in FILLER_KINDS if k not in banned]
        if weekend:
            kinds = [k for k in kinds if k not in ("meeting", "project")] or kinds
        bullets = [filler_entry(rng.choice(kinds), rng, persona.vocab) for _ in range(count)]
        for text in story:
            bullets.insert(rng.randint(0, len(bullets)), text)
        if bullets:
            days[day] = bullets
        day += timedelta(days=1)
    return days


def render_day(day: date, bullets: list[str], rng: random.Random) -> str:
    """A daily log as the app writes it."""
    lines = [f"# {day.isoformat()}", ""]
    style = rng.choices(("plain", "summary", "session"), weights=(4, 2, 4))[0]
    if style == "plain":
        lines += [f"- {b}" for b in bullets]
    elif style == "summary":
        lines += ["## Daily Summary", ""] + [f"- {b}" for b in bullets]
    else:
        split = len(bullets) >= 2 and rng.random() < 0.3
        groups = [bullets[:1], bullets[1:]] if split else [bullets]
        hour = rng.randint(8, 13)
        first = 1
        for i, group in enumerate(groups):
            if i:
                lines.append("")
                hour = rng.randint(hour + 2, 22)
            last = first + rng.randint(3, 18)
            title = rng.choice(SESSION_TITLES)
            lines += [
                f"## {hour:02d}:{rng.randint(0, 59):02d} · {title} · messages {first}–{last}",
                "",
            ]
            lines += [f"- {b}" for b in group]
            first = last + 1
    return "\n".join(lines) + "\n"


def build_files(persona: Persona) -> dict[str, str]:
    """Workspace-relative path → text, deterministic for a persona."""
    rng = random.Random(persona.seed * 7919 + 1)
    files = {"MEMORY.md": persona.memory_md.strip() + "\n"}
    for day, bullets in sorted(generate_logs(persona).items()):
        files[f"memory/{day.isoformat()}.md"] = render_day(day, bullets, rng)
    return files


# --------------------------------------------------------------------------- personas

ANA_STORIES = """
2025-06-02  Started keeping a work journal in plain Markdown files
2025-07-09  The plumber fixed the boiler pressure valve and said to bleed the radiators every autumn
2025-09-15  Uses Vim for everything, from Go services to commit messages; the vimrc is 400 lines now
2025-09-20  Bought a ThinkPad X1 Carbon as my main laptop; Linux runs fine on it
2025-10-03  Renewed the lease on the Kreuzberg flat in Berlin for another year
2025-10-21  Fixed a Harbor bug where retried webhooks were delivered twice
2025-11-06  Two years at Zalando today; still enjoying the checkout team
2025-12-02  Harbor stores its event log in Postgres; set up the read replica today
2025-12-06  Mulled wine at the Kreuzberg Christmas market with the team
2026-02-10  Team standup is at 9:00 every morning, cameras on
2026-02-25  Harbor bug: the websocket pool leaked connections on reconnect; fixed with a finally
            block
2026-03-14  Birthday dinner at Nobelhart & Schmutzig with Tom; the tasting menu was wild
2026-05-12  Knee injury from the half marathon: no running for a few months, swimming twice a
            week instead
2026-04-28  Moved into the new apartment in Alfama, Lisbon; boxes everywhere but the view of the
            river is worth it
2026-06-01  First day at Stripe on the billing infrastructure team; work laptop setup took all
            morning
2026-06-03  Now reporting to Priya Raman, who runs billing infrastructure at Stripe
2026-07-08  Lena's birthday drinks on a rooftop bar in Bairro Alto
2026-07-19  Finished migrating Harbor's database off Postgres onto SQLite with Litestream backups;
            one less server to babysit
2026-08-14  The MacBook Air M4 arrived; migrating dotfiles off the ThinkPad this weekend
2026-09-07  Standup moved to 10:30 so the folks in Toronto can join
2026-09-03  Gave up espresso on the doctor's advice; green tea every morning now
2026-09-29  Fixed the Harbor CSV export quoting bug that broke Excel imports
2026-10-02  Mum's birthday: long video call and sent her flowers
2026-10-12  Switched from Vim to Zed last week; the built-in multiplayer editing won me over
2026-10-21  Dinner at a tiny tasca in Graça with Lena, grilled sardines and vinho verde
2026-11-06  Dinner at Taberna da Rua das Flores with Marta, the best octopus so far
2026-11-11  Spent most of the week prototyping the usage-based pricing calculator for billing
2026-11-19  Paired with Lena on the invoice PDF renderer and finally fixed the page-break bug
"""

ANA = Persona(
    name="ana",
    seed=11,
    start=d("2025-06-01"),
    now=d("2026-11-20"),
    memory_md="""
# Memory

- Name is Ana Ribeiro; goes by Ana <!-- mem id=a1f001 conf=high src=user at=2025-06-01 -->
- Birthday: 14 March <!-- mem id=a1f002 conf=high src=user at=2025-06-01 -->
- Partner: Tom, a sound engineer
- Prefers dark mode and short answers with the code first
- Writes Go at work and Python for scripts
- Side project with Jakub: Harbor, a self-hosted webhook relay
- Allergic to cats <!-- mem id=a1f003 conf=high src=user at=2025-06-03 -->
- Wants reminders about visa paperwork well ahead of deadlines
- Drinks two espressos every morning before standup
- Runs 25 km a week along the canal <!-- mem id=a1f004 conf=high src=assistant at=2025-07-01 -->
- Manager is Sofia Lang, head of the checkout team
""",
    stories=parse_stories(ANA_STORIES),
    cases=(
        Case(
            "ana-coffee-memory",
            MEMORY_VS_LOG,
            "what do I drink in the mornings?",
            ("Gave up espresso on the doctor's advice",),
            ("Drinks two espressos every morning",),
        ),
        Case(
            "ana-exercise-memory",
            MEMORY_VS_LOG,
            "what do I do for exercise these days?",
            ("Knee injury from the half marathon",),
            ("Runs 25 km a week along the canal",),
        ),
        Case(
            "ana-manager-memory",
            MEMORY_VS_LOG,
            "who is my manager?",
            ("Now reporting to Priya Raman",),
            ("Manager is Sofia Lang",),
        ),
        Case(
            "ana-editor-now",
            CURRENT,
            "which editor do I use now?",
            ("Switched from Vim to Zed",),
            ("Uses Vim for everything",),
        ),
        Case(
            "ana-city-now",
            CURRENT,
            "where do I live?",
            ("Moved into the new apartment in Alfama",),
            ("Renewed the lease on the Kreuzberg flat",),
        ),
        Case(
            "ana-job-now",
            CURRENT,
            "where do I work these days?",
            ("First day at Stripe",),
            ("Two years at Zalando today",),
        ),
        Case(
            "ana-laptop-now",
            CURRENT,
            "what's my current laptop?",
            ("The MacBook Air M4 arrived",),
            ("Bought a ThinkPad X1 Carbon",),
        ),
        Case(
            "ana-standup-now",
            CURRENT,
            "is standup still at 9?",
            ("Standup moved to 10:30",),
            ("Team standup is at 9:00",),
        ),
        Case(
            "ana-harbor-db-now",
            CURRENT,
            "what database does Harbor use?",
            ("migrating Harbor's database off Postgres",),
            ("Harbor stores its event log in Postgres",),
        ),
        Case(
            "ana-editor-before",
            HISTORY,
            "what editor was I using before Zed?",
            ("Uses Vim for everything",),
            ("Switched from Vim to Zed",),
        ),
        Case(
            "ana-city-2025",
            HISTORY,
            "where did I live in 2025?",
            ("Renewed the lease on the Kreuzberg flat",),
            ("Moved into the new apartment in Alfama",),
        ),
        Case(
            "ana-job-before",
            HISTORY,
            "which company was I at before Stripe?",
            ("Two years at Zalando today",),
            ("First day at Stripe",),
        ),
        Case(
            "ana-harbor-db-before",
            HISTORY,
            "what did Harbor run on before the SQLite migration?",
            ("Harbor stores its event log in Postgres",),
            ("migrating Harbor's database off Postgres",),
        ),
        Case(
            "ana-harbor-first-bug",
            HISTORY,
            "what was the first bug we fixed in Harbor?",
            ("retried webhooks were delivered twice",),
            ("websocket pool leaked connections", "Harbor CSV export quoting bug"),
        ),
        Case(
            "ana-yesterday",
            TIME,
            "what did I do yesterday?",
            ("fixed the page-break bug",),
            window=window("2026-11-19"),
        ),
        Case(
            "ana-last-week",
            TIME,
            "what did I work on last week?",
            ("prototyping the usage-based pricing calculator",),
            ("fixed the page-break bug",),
            window=window("2026-11-09", "2026-11-15"),
            quiet=("project", "bug", "meeting"),
        ),
        Case(
            "ana-two-weeks-dinner",
            TIME,
            "where did I go for dinner two weeks ago?",
            ("Taberna da Rua das Flores",),
            ("tiny tasca in Graça",),
            window=window("2026-11-06"),
            quiet=("food",),
            quiet_span=window("2026-11-02", "2026-11-10"),
        ),
        Case(
            "ana-birthday-march",
            TIME,
            "what did I do on my birthday in March?",
            ("Birthday dinner at Nobelhart",),
            ("Lena's birthday drinks", "Mum's birthday"),
            window=window("2026-03-01", "2026-03-31"),
        ),
        Case(
            "ana-plumber",
            CONTROL,
            "what did the plumber say I should do every autumn?",
            ("bleed the radiators every autumn",),
        ),
    ),
    vocab=Vocab(
        projects=(
            "Harbor",
            "the billing dashboard",
            "the internal deploy CLI",
            "the invoice service",
        ),
        bug_projects=("the billing dashboard", "the internal deploy CLI", "the invoice service"),
        colleagues=("Lena", "Jakub", "Sofia", "Dev"),
        friends=("Marta", "Jonas", "Ines"),
        family=("Mum", "my brother Pedro"),
    ),
)

BEN_STORIES = """
2025-05-20  Cracked the screen on my Pixel 7 again
2025-06-02  Grandma's lemon cake recipe: 3 eggs, 200 g sugar, zest of two lemons, bake 45 min at
            170°C
2025-06-20  Took Biscuit to the vet for his yearly shots; he's 11 now and slowing down
2025-07-14  Kotlin is still my favourite language; coroutines just click
2025-08-02  Drove the Golf to the coast for the weekend; needs new tyres soon
2025-09-08  1:1 with Tomasz, my manager: agreed I'd lead the offline-sync epic
2025-09-13  Hike in the Harz with Jonas, rained the whole way
2025-10-09  At KotlinConf in Copenhagen, mostly hallway track
2025-10-12  Ran the autumn 10k in 51:40, legs were dead
2025-11-03  Biscuit died this morning. Eleven good years.
2025-12-12  Christmas party at work, secret santa got me socks
2025-12-25  Christmas at my parents' in Leipzig; Dad burned the goose again
2026-01-05  Got an iPhone 16 to test the iOS build on real hardware; using it as my daily phone now
2026-01-19  Reorg announced: I now report to Priya; Tomasz moves to the platform group
2026-02-16  Launch date for the Android app set: April 30
2026-02-27  Sold the Golf; getting to work by e-bike now, 25 minutes each way
2026-01-28  Stopped football after the ankle sprain; bouldering on Thursdays now
2026-03-02  Dropped Spanish and switched to Japanese lessons with a tutor on Tuesdays
2026-03-22  Adopted a rescue dog from the shelter, a beagle mix; named her Miso
2026-04-09  Been writing Gleam on weekends and honestly I like it more than anything else I've used
2026-04-14  Sprint planning: decided to move crash reporting to Sentry
2026-04-20  The Android launch slipped to June 25 because of the payments SDK review
2026-04-25  Moved to Hamburg for Lea's new job at the UKE; the flat in Ottensen is tiny but
            bright
2026-05-02  Hiked up the Brocken with Miso, she slept the whole way home
2026-05-20  At Droidcon Berlin, gave my talk on offline sync to a full room
2026-05-26  Sprint planning: decided to freeze the public API until the launch
2026-05-31  Ran the city 10k in 48:12, a personal best by almost two minutes
2026-06-09  Sprint planning: we decided to drop tablet layouts from the first release
2026-06-13  Hiked the Malerweg stage in Saxon Switzerland with Jonas, brutal stairs
"""

BEN = Persona(
    name="ben",
    seed=23,
    start=d("2025-05-01"),
    now=d("2026-06-15"),
    memory_md="""
# Memory

- Name is Ben Hofmann <!-- mem id=b2f001 conf=high src=user at=2025-05-01 -->
- Mobile developer, Android first, some iOS
- Partner: Lea, a nurse who works night shifts
- Allergic to penicillin <!-- mem id=b2f002 conf=high src=user at=2025-05-02 -->
- Likes answers in bullet points
- Birthday: 2 September
- Learning Spanish on Duolingo, 15 minutes a day
- Lives in a flat in Prenzlauer Berg, Berlin
- Plays five-a-side football on Thursdays <!-- mem id=b2f004 conf=high src=assistant at=2025-06-10 -->
""",
    stories=parse_stories(BEN_STORIES),
    cases=(
        Case(
            "ben-language-memory",
            MEMORY_VS_LOG,
            "which language am I learning?",
            ("Dropped Spanish and switched to Japanese",),
            ("Learning Spanish on Duolingo",),
        ),
        Case(
            "ben-home-memory",
            MEMORY_VS_LOG,
            "where do I live?",
            ("Moved to Hamburg for Lea's new job",),
            ("Lives in a flat in Prenzlauer Berg",),
        ),
        Case(
            "ben-thursday-memory",
            MEMORY_VS_LOG,
            "what sport do I do on Thursdays?",
            ("Stopped football after the ankle sprain",),
            ("Plays five-a-side football on Thursdays",),
        ),
        Case(
            "ben-dog-now",
            CURRENT,
            "what's my dog called?",
            ("named her Miso",),
            ("Took Biscuit to the vet", "Biscuit died this morning"),
        ),
        Case(
            "ben-language-now",
            CURRENT,
            "what's my favourite programming language?",
            ("Been writing Gleam on weekends",),
            ("Kotlin is still my favourite language",),
        ),
        Case(
            "ben-manager-now",
            CURRENT,
            "who is my manager?",
            ("I now report to Priya",),
            ("1:1 with Tomasz, my manager",),
        ),
        Case(
            "ben-launch-now",
            CURRENT,
            "when does the Android app launch?",
            ("launch slipped to June 25",),
            ("Launch date for the Android app set",),
        ),
        Case(
            "ben-phone-now",
            CURRENT,
            "what phone do I have?",
            ("Got an iPhone 16",),
            ("Cracked the screen on my Pixel 7",),
        ),
        Case(
            "ben-commute-now",
            CURRENT,
            "how do I get to work these days?",
            ("Sold the Golf",),
            ("Drove the Golf to the coast",),
        ),
        Case(
            "ben-dog-before",
            HISTORY,
            "what was my old dog's name?",
            ("Took Biscuit to the vet", "Biscuit died this morning"),
            ("named her Miso",),
        ),
        Case(
            "ben-language-2025",
            HISTORY,
            "which language did I like best last summer?",
            ("Kotlin is still my favourite language",),
            ("Been writing Gleam on weekends",),
        ),
        Case(
            "ben-manager-before",
            HISTORY,
            "who was my manager before the reorg?",
            ("1:1 with Tomasz, my manager",),
            ("I now report to Priya",),
        ),
        Case(
            "ben-launch-original",
            HISTORY,
            "what was the original launch date for the Android app?",
            ("Launch date for the Android app set",),
            ("launch slipped to June 25",),
        ),
        Case(
            "ben-planning-tuesday",
            TIME,
            "what did we decide in sprint planning last Tuesday?",
            ("drop tablet layouts",),
            ("move crash reporting to Sentry", "freeze the public API"),
            window=window("2026-06-09"),
            quiet=("meeting",),
            quiet_span=window("2026-06-08", "2026-06-14"),
        ),
        Case(
            "ben-hike-weekend",
            TIME,
            "where did I go hiking last weekend?",
            ("Malerweg stage",),
            ("Hike in the Harz", "Hiked up the Brocken"),
            window=window("2026-06-13", "2026-06-14"),
            quiet=("exercise", "travel"),
            quiet_span=window("2026-06-11", "2026-06-14"),
        ),
        Case(
            "ben-conference-may",
            TIME,
            "which conference did I go to in May 2026?",
            ("At Droidcon Berlin",),
            ("At KotlinConf in Copenhagen",),
            window=window("2026-05-01", "2026-05-31"),
        ),
        Case(
            "ben-christmas",
            TIME,
            "what did I do last Christmas?",
            ("Dad burned the goose again",),
            ("Christmas party at work",),
            window=window("2025-12-24", "2025-12-26"),
        ),
        Case(
            "ben-race-two-weeks",
            TIME,
            "how did the race two weeks ago go?",
            ("Ran the city 10k in 48:12",),
            ("Ran the autumn 10k in 51:40",),
            window=window("2026-05-28", "2026-06-04"),
            quiet=("exercise",),
        ),
        Case(
            "ben-lemon-cake",
            CONTROL,
            "how do I make grandma's lemon cake?",
            ("Grandma's lemon cake recipe",),
        ),
        Case(
            "ben-allergy", CONTROL, "am I allergic to any medication?", ("Allergic to penicillin",)
        ),
    ),
    vocab=Vocab(
        projects=(
            "the offline-sync module",
            "the Android app",
            "the design system",
            "the release scripts",
        ),
        bug_projects=(
            "the offline-sync module",
            "the Android app",
            "the design system",
            "the release scripts",
        ),
        colleagues=("Priya", "Malte", "Sanne", "Yusuf"),
        friends=("Jonas", "Kai", "Mira"),
        family=("Mum", "my sister Anke"),
    ),
)

CHLOE_STORIES = """
2025-11-18  My shell is bash with a hand-rolled prompt; never saw the point of zsh
2025-11-23  Made my usual Sunday beef ragu, freezing half
2025-11-29  Marco's sister Giulia is allergic to shellfish; remember when cooking for her
2025-12-04  Payments data team offsite in Porto; we planned the ledger warehouse
2025-12-09  Passport renewed, valid until December 2035
2025-12-15  Moved all my passwords into LastPass and turned on the browser autofill
2025-12-20  Finished 'Project Hail Mary' on the train home
2025-12-25  Christmas dinner at Marco's parents: roast lamb and far too much wine
2025-12-28  Deployed tidepool to Heroku on the hobby dyno
2025-12-31  Quiet New Year's Eve at home, asleep before midnight
2026-01-13  The pipeline repo builds on Jenkins; the nightly job takes 40 minutes
2026-02-03  Ordered a Keychron Q1 with brown switches for the home office
2026-02-17  Started 'Piranesi', loving the strangeness
2026-03-30  After the breach news, exported everything from LastPass to 1Password
2026-04-16  Tokyo day 3: tonkotsu at Fuunji, the queue was worth it
2026-05-11  Transferred to the search relevance team today; new desk, new on-call rota
2026-06-03  Paged for Kafka consumer lag on the clickstream topic; scaled the consumers
2026-06-21  Heroku bill went up again so tidepool now runs on a Hetzner box
2026-07-15  Replaced VS Code with Helix for everything; modal editing without the plugins
2026-08-01  A month fully vegetarian now and I don't miss meat at all
2026-08-12  Halfway through 'The Ministry for the Future'; the heatwave chapter is brutal
2026-08-20  On-call incident: schema drift broke the search index build
2026-09-02  Gave fish a try after Marco's demo and I'm not going back; autosuggestions are great
2026-09-20  Bought a folding bike; cycling to the office now, 20 minutes along the river
2026-10-07  Moved the pipeline repo's CI to GitHub Actions; nightly now runs in 12 minutes
2026-10-22  Back in Tokyo for the data summit; okonomiyaki in Shibuya with the speakers
2026-10-30  Quit CrossFit after the shoulder thing; doing yoga three evenings a week instead
2026-11-16  Built a split keyboard (Corne) over the weekend; typing is slow but my wrists feel
            better
2026-12-25  Christmas dinner at home: we made a mushroom Wellington and Marco's panettone pudding
2026-12-31  New Year's Eve on the rooftop with Marco and the neighbours, fireworks over the river
2027-01-08  Paged at 2am: the nightly export hit a disk quota on the warehouse node
2027-01-09  Went ice skating at the outdoor rink with Marco's nieces
"""

CHLOE = Persona(
    name="chloe",
    seed=37,
    start=d("2025-11-01"),
    now=d("2027-01-11"),
    memory_md="""
# Memory

- Name is Chloé Martin; data engineer <!-- mem id=c3f001 conf=high src=user at=2025-11-01 -->
- Partner: Marco, teaches Italian at the language school
- Born in Lyon; speaks French, English and some Italian
- Prefers metric units and 24-hour times
- Side project: tidepool, a tide-table API <!-- mem id=c3f002 conf=medium src=auto at=2025-11-20 -->
- Likes examples in Python and SQL
- Editor: VS Code with the Vim keybindings
- Commutes to the office by metro, line 11
- CrossFit three times a week <!-- mem id=c3f003 conf=high src=assistant at=2025-11-05 -->
""",
    stories=parse_stories(CHLOE_STORIES),
    cases=(
        Case(
            "chloe-editor-memory",
            MEMORY_VS_LOG,
            "which editor do I use?",
            ("Replaced VS Code with Helix",),
            ("Editor: VS Code with the Vim keybindings",),
        ),
        Case(
            "chloe-commute-memory",
            MEMORY_VS_LOG,
            "how do I get to the office?",
            ("Bought a folding bike",),
            ("Commutes to the office by metro",),
        ),
        Case(
            "chloe-workout-memory",
            MEMORY_VS_LOG,
            "what workouts do I do these days?",
            ("Quit CrossFit after the shoulder thing",),
            ("CrossFit three times a week",),
        ),
        Case(
            "chloe-shell-now",
            CURRENT,
            "what shell am I using these days?",
            ("Gave fish a try",),
            ("My shell is bash",),
        ),
        Case(
            "chloe-ci-now",
            CURRENT,
            "which CI does the pipeline repo use?",
            ("CI to GitHub Actions",),
            ("builds on Jenkins",),
        ),
        Case(
            "chloe-team-now",
            CURRENT,
            "which team am I on?",
            ("Transferred to the search relevance team",),
            ("Payments data team offsite",),
        ),
        Case(
            "chloe-diet-now",
            CURRENT,
            "do I eat meat?",
            ("A month fully vegetarian",),
            ("Sunday beef ragu",),
        ),
        Case(
            "chloe-passwords-now",
            CURRENT,
            "which password manager do I use?",
            ("from LastPass to 1Password",),
            ("passwords into LastPass",),
        ),
        Case(
            "chloe-keyboard-now",
            CURRENT,
            "what keyboard am I typing on?",
            ("Built a split keyboard",),
            ("Keychron Q1 with brown switches",),
        ),
        Case(
            "chloe-tidepool-now",
            CURRENT,
            "where is tidepool hosted?",
            ("tidepool now runs on a Hetzner box",),
            ("Deployed tidepool to Heroku",),
        ),
        Case(
            "chloe-ci-before",
            HISTORY,
            "what did the pipeline repo build on before GitHub Actions?",
            ("builds on Jenkins",),
            ("CI to GitHub Actions",),
        ),
        Case(
            "chloe-tidepool-first",
            HISTORY,
            "where did I first deploy tidepool?",
            ("Deployed tidepool to Heroku",),
            ("tidepool now runs on a Hetzner box",),
        ),
        Case(
            "chloe-team-before",
            HISTORY,
            "which team was I on before search relevance?",
            ("Payments data team offsite",),
            ("Transferred to the search relevance team",),
        ),
        Case(
            "chloe-shell-before",
            HISTORY,
            "what shell did I use before fish?",
            ("My shell is bash",),
            ("Gave fish a try",),
        ),
        Case(
            "chloe-christmas",
            TIME,
            "what did we cook last Christmas?",
            ("mushroom Wellington",),
            ("roast lamb and far too much wine",),
            window=window("2026-12-24", "2026-12-26"),
            quiet=("food",),
        ),
        Case(
            "chloe-tokyo-april",
            TIME,
            "what did I eat in Tokyo in April?",
            ("tonkotsu at Fuunji",),
            ("okonomiyaki in Shibuya",),
            window=window("2026-04-01", "2026-04-30"),
            quiet=("food", "travel"),
            quiet_span=window("2026-04-10", "2026-04-22"),
        ),
        Case(
            "chloe-nye",
            TIME,
            "what did I do on New Year's Eve?",
            ("fireworks over the river",),
            ("Quiet New Year's Eve at home",),
            window=window("2026-12-31"),
        ),
        Case(
            "chloe-book-august",
            TIME,
            "what book was I reading in August?",
            ("The Ministry for the Future",),
            ("Started 'Piranesi'", "Finished 'Project Hail Mary'"),
            window=window("2026-08-01", "2026-08-31"),
            quiet=("reading",),
        ),
        Case(
            "chloe-last-saturday",
            TIME,
            "what did I do last Saturday?",
            ("ice skating at the outdoor rink",),
            window=window("2027-01-09"),
        ),
        Case(
            "chloe-incident-friday",
            TIME,
            "what was the incident I got paged for on Friday?",
            ("disk quota on the warehouse node",),
            ("schema drift broke the search index build", "Kafka consumer lag"),
            window=window("2027-01-08"),
            quiet=("bug",),
            quiet_span=window("2027-01-05", "2027-01-10"),
        ),
        Case(
            "chloe-giulia", CONTROL, "what can't Giulia eat?", ("Giulia is allergic to shellfish",)
        ),
        Case("chloe-passport", CONTROL, "when does my passport expire?", ("Passport renewed",)),
    ),
    vocab=Vocab(
        projects=("the ledger warehouse", "the clickstream pipeline", "the dbt models", "tidepool"),
        bug_projects=("the ledger warehouse", "the clickstream pipeline", "the dbt models"),
        colleagues=("Aisha", "Lukas", "Noor", "Pieter"),
        friends=("Sam", "Elodie", "Tariq"),
        family=("Maman", "my brother Hugo"),
    ),
)

PERSONAS: tuple[Persona, ...] = (ANA, BEN, CHLOE)


def all_cases() -> list[tuple[Persona, Case]]:
    return [(p, c) for p in PERSONAS for c in p.cases]


# --------------------------------------------------------------------------- validation

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the and or but of to in on at for with from by is am are was were be been do does did "
    "i me my we our you your it its this that these those what which who whom where when how why "
    "now still any there here as so not no too very just can".split()
)


def terms(text: str) -> set[str]:
    """Content words, lower-cased, a plural/3rd-person ``s`` stripped."""
    out = set()
    for word in _WORD.findall(text.lower().replace("'s", "")):
        if word in _STOP:
            continue
        out.add(
            word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
        )
    return out


def shared_terms(question: str, text: str) -> set[str]:
    """Question keywords the entry also contains (a plain lexical measure, engine-independent)."""
    return terms(question) & terms(text)


@dataclass(frozen=True)
class Location:
    path: str
    line: int
    text: str

    @property
    def day(self) -> date | None:
        match = re.fullmatch(r"memory/(\d{4}-\d{2}-\d{2})\.md", self.path)
        return date.fromisoformat(match.group(1)) if match else None


def locate(files: dict[str, str], marker: str) -> list[Location]:
    """Every line of the workspace that contains ``marker``."""
    found = []
    for path, text in files.items():
        for number, line in enumerate(text.splitlines(), start=1):
            if marker in line:
                found.append(Location(path, number, line))
    return found


def validate(personas: Sequence[Persona] = PERSONAS) -> list[str]:
    """Problems with the case data (empty when it is sound)."""
    problems: list[str] = []
    ids: set[str] = set()
    counts = dict.fromkeys(CATEGORIES, 0)
    for persona in personas:
        files = build_files(persona)
        for entry in persona.stories:
            if not persona.start <= entry.day < persona.now:
                problems.append(f"{persona.name}: story entry {entry.text!r} outside the log span")
        for case in persona.cases:
            where = f"{case.id}"
            if case.id in ids:
                problems.append(f"{where}: duplicate id")
            ids.add(case.id)
            if case.category not in CATEGORIES:
                problems.append(f"{where}: unknown category {case.category}")
                continue
            counts[case.category] += 1
            if not case.question.strip() or not case.targets:
                problems.append(f"{where}: no question or no target")
            located: dict[str, Location] = {}
            for marker in case.targets + case.rivals:
                hits = locate(files, marker)
                if len(hits) != 1:
                    problems.append(f"{where}: marker {marker!r} found {len(hits)} times")
                else:
                    located[marker] = hits[0]
            if len(located) != len(case.targets) + len(case.rivals):
                continue
            target_days = [located[m].day for m in case.targets]
            rival_days = [located[m].day for m in case.rivals]
            if case.category in (CURRENT, HISTORY) and not case.rivals:
                problems.append(f"{where}: {case.category} needs rivals")
            if case.category == CURRENT:
                if any(t is None for t in target_days) or any(r is None for r in rival_days):
                    problems.append(f"{where}: current-state entries must be in dated logs")
                elif min(target_days) <= max(rival_days):  # type: ignore[type-var, operator]
                    problems.append(f"{where}: the target is not newer than every rival")
            if case.category == MEMORY_VS_LOG:
                if any(t is None for t in target_days):
                    problems.append(f"{where}: memory-vs-log targets must be in dated logs")
                if any(located[m].path != "MEMORY.md" for m in case.rivals):
                    problems.append(f"{where}: memory-vs-log rivals must be in MEMORY.md")
            if case.category == HISTORY:
                if any(t is None for t in target_days) or any(r is None for r in rival_days):
                    problems.append(f"{where}: history entries must be in dated logs")
                elif not max(target_days) < max(rival_days):  # type: ignore[type-var, operator]
                    problems.append(f"{where}: no rival is newer than the target")
            if case.category == TIME:
                if case.window is None:
                    problems.append(f"{where}: time-anchored case without a window")
                    continue
                lo, hi = case.window
                if lo > hi or hi >= persona.now:
                    problems.append(f"{where}: window {lo}..{hi} not before now {persona.now}")
                if not all(t is not None and lo <= t <= hi for t in target_days):
                    problems.append(f"{where}: target outside its window")
                if any(r is not None and lo <= r <= hi for r in rival_days):
                    problems.append(f"{where}: a rival lies inside the window")
            elif case.window or case.quiet:
                problems.append(f"{where}: window/quiet only for time-anchored cases")
            if case.quiet and not set(case.quiet) <= set(FILLER_KINDS):
                problems.append(f"{where}: unknown filler kind in quiet {case.quiet}")
    for category, minimum in MINIMUMS.items():
        if counts[category] < minimum:
            problems.append(f"{category}: {counts[category]} cases, need {minimum}")
    return problems


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    persona: str
    case: Case
    #: 1-based rank of the first result covering a target (None: not returned).
    rank: int | None
    #: 1-based rank of the first result covering a rival.
    rival_rank: int | None
    top: list[dict[str, Any]] = field(default_factory=list)
    returned: int = 0
    newer_shares_more: bool | None = None
    #: The target's rank in the top :data:`DEPTH` at min_score 0 (what the ranking allows).
    depth_rank: int | None = None

    @property
    def passed(self) -> bool:
        return self.rank is not None and self.rank <= PASS_RANK[self.case.category]


def covers(result: SearchResult, location: Location) -> bool:
    return result.path == location.path and result.start_line <= location.line <= result.end_line


def first_rank(results: Sequence[SearchResult], locations: Iterable[Location]) -> int | None:
    locations = list(locations)
    for rank, result in enumerate(results, start=1):
        if any(covers(result, loc) for loc in locations):
            return rank
    return None


def describe(result: SearchResult) -> dict[str, Any]:
    breakdown = result.breakdown
    if dataclasses.is_dataclass(breakdown) and not isinstance(breakdown, type):
        bd: Any = dataclasses.asdict(breakdown)
    elif isinstance(breakdown, dict):
        bd = dict(breakdown)
    else:
        bd = getattr(breakdown, "__dict__", str(breakdown))
    bullets = [ln.strip()[2:] for ln in result.text.splitlines() if ln.lstrip().startswith("- ")]
    text = " | ".join(bullets) or " ".join(result.text.split())
    return {
        "location": f"{result.path}#L{result.start_line}-{result.end_line}",
        "score": round(float(result.score), 4),
        "breakdown": bd,
        "text": text if len(text) <= 160 else text[:157] + "...",
    }


def write_workspace(root: Path, files: dict[str, str]) -> None:
    """Write the files, leaving unchanged ones untouched and removing stray logs."""
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for stray in (root / "memory").glob("*.md"):
        if f"memory/{stray.name}" not in files:
            stray.unlink()
    for rel, text in files.items():
        path = root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def run_persona(
    persona: Persona, root: Path, embedder: Embedder, only: str | None
) -> tuple[list[Outcome], dict[str, Any]]:
    from tui.engine.engine import MemoryEngine

    files = build_files(persona)
    workspace = root / persona.name
    write_workspace(workspace, files)
    engine = MemoryEngine(workspace, embedder=embedder)
    outcomes: list[Outcome] = []
    try:
        engine.load_model()
        started = time.perf_counter()
        report = engine.sync()
        stats = engine.stats()
        info = {
            "persona": persona.name,
            "now": persona.now.isoformat(),
            "log_days": len(files) - 1,
            "entries": sum(t.count("\n- ") for t in files.values()),
            "chunks": stats.get("chunks"),
            "embedded": report.embedded,
            "sync_seconds": round(time.perf_counter() - started, 1),
        }
        for case in persona.cases:
            if only and only not in case.id:
                continue
            targets = [locate(files, m)[0] for m in case.targets]
            rivals = [locate(files, m)[0] for m in case.rivals]
            response = engine.search(case.question, now=persona.now)
            results = list(response.results)
            deep = engine.search(case.question, now=persona.now, max_results=DEPTH, min_score=0.0)
            newer_more = None
            if case.category == CURRENT:
                newer = len(shared_terms(case.question, targets[0].text))
                older = len(shared_terms(case.question, rivals[0].text))
                newer_more = newer > older
            outcomes.append(
                Outcome(
                    persona.name,
                    case,
                    first_rank(results, targets),
                    first_rank(results, rivals),
                    [describe(r) for r in results[:3]],
                    len(results),
                    newer_more,
                    first_rank(list(deep.results), targets),
                )
            )
    finally:
        engine.close()
    return outcomes, info


# --------------------------------------------------------------------------- report


def rate(outcomes: Sequence[Outcome], k: int) -> tuple[int, float]:
    hits = sum(1 for o in outcomes if o.rank is not None and o.rank <= k)
    return hits, hits / len(outcomes) if outcomes else 0.0


def summary(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    current = [o for o in outcomes if o.case.category == CURRENT]
    groups: list[tuple[str, list[Outcome]]] = []
    for category in CATEGORIES:
        groups.append((category, [o for o in outcomes if o.case.category == category]))
        if category == CURRENT:
            groups += [
                ("new shares more keywords", [o for o in current if o.newer_shares_more]),
                ("new shares ≤ keywords", [o for o in current if o.newer_shares_more is False]),
            ]
    groups.append(("overall", list(outcomes)))
    for name, group in groups:
        if not group:
            continue
        rows[name] = {
            "n": len(group),
            "top1": rate(group, 1)[0],
            "top3": rate(group, 3)[0],
            "returned": sum(1 for o in group if o.rank is not None),
            "deep": sum(1 for o in group if o.depth_rank is not None),
            "passed": sum(1 for o in group if o.passed),
        }
    return rows


def pct(part: int, whole: int) -> str:
    return f"{part:>2}/{whole:<2} {part / whole:6.1%}" if whole else "–"


def table(outcomes: Sequence[Outcome]) -> str:
    rows = summary(outcomes)
    head = (
        f"{'category':<30} {'n':>3}  {'top-1':>13}  {'top-3':>13}  {'returned':>13}  "
        f"{f'top-{DEPTH}':>13}  pass rule"
    )
    lines = [head, "-" * len(head)]
    for name, row in rows.items():
        label = name if name in CATEGORIES or name == "overall" else "  " + name
        rule = {HISTORY: "top-3", TIME: "top-3", CONTROL: "top-3"}.get(name, "top-1")
        if name == "overall":
            lines.append("-" * len(head))
            rule = f"passed {pct(row['passed'], row['n'])}"
        lines.append(
            f"{label:<30} {row['n']:>3}  {pct(row['top1'], row['n'])}  "
            f"{pct(row['top3'], row['n'])}  {pct(row['returned'], row['n'])}  "
            f"{pct(row['deep'], row['n'])}  {rule}"
        )
    return "\n".join(lines)


def failures(outcomes: Sequence[Outcome]) -> str:
    lines = []
    for o in outcomes:
        if o.passed:
            continue
        c = o.case
        lines.append(
            f"\n[{c.category}] {c.id}: {c.question!r} (target rank {o.rank or '—'}, rival rank "
            f"{o.rival_rank or '—'}, {o.returned} results; rank {o.depth_rank or '—'} of {DEPTH} "
            "at min_score 0)"
        )
        lines.append(f"    expected: {' | '.join(c.targets)}")
        for i, r in enumerate(o.top, start=1):
            bd = json.dumps(r["breakdown"], default=str)
            lines.append(f"    {i}. {r['location']} score {r['score']:.4f} {bd}")
            lines.append(f"       {r['text']}")
    return "\n".join(lines) if lines else "no failures"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true", help="list failures with their top 3")
    parser.add_argument("--json", action="store_true", help="print machine-readable figures")
    parser.add_argument(
        "--workdir", type=Path, help="keep the workspaces here (a re-run reuses the embeddings)"
    )
    parser.add_argument("--only", help="run only the cases whose id contains this")
    args = parser.parse_args(argv)

    problems = validate()
    if problems:
        print("case data is invalid:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2

    from tui.engine.embeddings import Embedder

    started = time.perf_counter()
    tmp = None
    if args.workdir:
        root = args.workdir.resolve()
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="memdeck-recency-")
        root = Path(tmp.name)
    embedder = Embedder()
    embedder.load()
    outcomes: list[Outcome] = []
    infos = []
    try:
        for persona in PERSONAS:
            got, info = run_persona(persona, root, embedder, args.only)
            outcomes += got
            infos.append(info)
            if not args.json:
                print(
                    f"{info['persona']}: now {info['now']}, {info['log_days']} daily logs, "
                    f"{info['entries']} entries, {info['chunks']} chunks, {info['embedded']} "
                    f"embedded, sync {info['sync_seconds']} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if tmp is not None:
            shutil.rmtree(root, ignore_errors=True)
    seconds = time.perf_counter() - started
    if args.json:
        print(
            json.dumps(
                {
                    "summary": summary(outcomes),
                    "workspaces": infos,
                    "seconds": round(seconds, 1),
                    "cases": [
                        {
                            "id": o.case.id,
                            "category": o.case.category,
                            "question": o.case.question,
                            "rank": o.rank,
                            "rival_rank": o.rival_rank,
                            "returned": o.returned,
                            "depth_rank": o.depth_rank,
                            "passed": o.passed,
                            "newer_shares_more": o.newer_shares_more,
                            **({"top": o.top} if args.verbose else {}),
                        }
                        for o in outcomes
                    ],
                },
                indent=2,
                default=str,
            )
        )
    else:
        print(f"\nRecency benchmark — shipped search defaults, {len(outcomes)} cases\n")
        print(table(outcomes))
        print(f"\nruntime {seconds:.0f} s")
        if args.verbose:
            print(failures(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
