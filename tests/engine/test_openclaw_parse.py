"""An OpenClaw workspace read as memory (issue 34, items 1 and 2): HTML comments, OpenClaw's
``[score=… source=…]`` suffixes, a YAML front matter and a session file's header bullets are
never an entry, never indexed, never injected; memdeck's own ``<!-- mem … -->`` stays metadata;
the user's files are never changed. Real index, real model, ``memdeck`` as a process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from support.chat_support import memdeck_env, run_memdeck
from support.openclaw_fixture import OPENCLAW_WORKSPACE, copy_openclaw_workspace

from tui.engine.chunker import chunk_markdown
from tui.engine.embeddings import Embedder, count_tokens_batch
from tui.engine.engine import MemoryEngine
from tui.engine.entries import parse_entries
from tui.engine.memory_lines import memory_lines, session_header, strip_comments
from tui.engine.metadata import split_meta

NOW = date(2026, 3, 10)
SESSION = "memory/2026-03-05-orders-api-pagination.md"
#: What must never reach a result, an entry or the injection.
NOISE = ("<!--", "-->", "[score=", "**Session Key**", "**Session ID**", "**Source**", "telegram")
#: Questions and where their fact is.
FACTS = {
    "orders API pagination": f"{SESSION}#L9-12",
    "does the orders API cursor expire": f"{SESSION}#L9-12",
    "how do I reach the Grafana dashboards from home": "memory/2026-03-07-office-vpn.md#L9-10",
    "which Postgres version does staging run": "memory/2026-03-04.md#L3-3",
}


def fixture_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and not {".git", ".memdeck"} & set(p.relative_to(root).parts)
        and p.name != ".gitignore"
    }


def assert_clean(text: str) -> None:
    for noise in NOISE:
        assert noise not in text, f"{noise!r} in {text!r}"


@pytest.fixture
def engine(tmp_path: Path, embedder: Embedder) -> Iterator[MemoryEngine]:
    memory = MemoryEngine(copy_openclaw_workspace(tmp_path), embedder=embedder)
    memory.load_model()
    memory.sync()
    yield memory
    memory.close()


# -- the lines --


def test_a_comment_says_nothing_wherever_it_is() -> None:
    lines = [
        "<!-- openclaw:dreaming:light:start -->",
        "- Invoices run at 02:00. <!-- trigger: invoices, billing --> <!-- importance: 8 -->",
        "<!-- a note",
        "over two lines -->",
        "- Use `<!-- x -->` to hide a line.",
        "- Kept <!-- one --> here, a stray <!-- stays",
        "  <!-- a block",
        "- still in the comment",
        "--> and after",
        "```html",
        "<!-- code is code -->",
        "```",
    ]
    read = list(memory_lines(lines))
    assert [line.text for line in read] == [
        "",
        "- Invoices run at 02:00.",
        "",
        "",
        "- Use `<!-- x -->` to hide a line.",
        "- Kept here, a stray <!-- stays",
        "",
        "",
        "and after",
        "```html",
        "<!-- code is code -->",
        "```",
    ]
    hidden = [line.hidden for line in read]
    assert hidden == [True, False, True, True, False, False, True, True] + [False] * 4


def test_a_promotion_suffix_leaves_the_text_and_the_rest_stays() -> None:
    line = "- Staging is Postgres 16. [score=0.861 recalls=4 avg=0.702 source=memory/a.md:3-3]"
    assert next(memory_lines([line])).text == "- Staging is Postgres 16."
    kept = "- The ranking uses [score=high] as a label in the middle, then more."
    assert next(memory_lines([kept])).text == kept


def test_memdecks_own_metadata_stays_metadata() -> None:
    line = (
        "- Prefers tabs <!-- trigger: tabs --> <!-- mem id=7f3a conf=low src=user at=2026-03-01 -->"
    )
    read = next(memory_lines([line]))
    assert (read.visible, read.meta) == split_meta(line)
    assert read.meta is not None and (read.meta.id, read.meta.confidence) == ("7f3a", "low")
    assert read.text == "- Prefers tabs"
    (entry,) = parse_entries(line + "\n")
    assert (entry.text, entry.entry_id, entry.raw) == ("Prefers tabs", "7f3a", (line,))
    (chunk,) = chunk_markdown(line + "\n", "MEMORY.md", count_tokens_batch)
    assert (chunk.text, chunk.confidence, chunk.entry_ids) == ("- Prefers tabs", "low", ("7f3a",))


def test_front_matter_is_metadata_only_at_the_top_and_closed() -> None:
    text = '---\ntitle: "MEMORY.md"\nread_when:\n  - Main session start\n---\n\n- A fact.\n'
    assert [e.text for e in parse_entries(text)] == ["A fact."]
    assert [c.text for c in chunk_markdown(text, "MEMORY.md", count_tokens_batch)] == ["- A fact."]
    unclosed = "---\n- First.\n- Second.\n"
    assert [e.text for e in parse_entries(unclosed)] == ["---", "First.", "Second."]
    later = "- A fact.\n\n---\ntitle: x\n---\n"
    assert "title: x" in [e.text for e in parse_entries(later)]


def test_a_session_files_header_bullets_are_its_context_not_entries() -> None:
    lines = (OPENCLAW_WORKSPACE / SESSION).read_text(encoding="utf-8").split("\n")
    assert session_header(lines) == [
        (1, "Session", "2026-03-05 14:22:09 UTC"),
        (3, "Session Key", "agent:main:telegram:direct:4471"),
        (4, "Session ID", "6f1c2a9e-3b7d-4c21-9a55-0d8e7f41b2c3"),
        (5, "Source", "telegram"),
    ]
    entries = parse_entries("\n".join(lines), SESSION)
    assert [(e.start, e.end) for e in entries] == [(9, 9), (10, 10), (11, 11), (12, 12)]
    # The same bullets in a daily log are facts.
    log = "# 2026-03-05\n\n- **Source**: the vendor's changelog\n"
    assert [e.text for e in parse_entries(log, "memory/2026-03-05.md")] == [
        "**Source**: the vendor's changelog"
    ]
    assert session_header(log.split("\n")) == []


def test_comment_stripping_is_linear_on_hostile_lines() -> None:
    line = "`" * 5000 + " ``" * 5000 + " <!-- x " * 5000
    text, open_comment = strip_comments(line)
    assert not open_comment and text == line  # no comment closes: every "<!--" is literal
    assert strip_comments("<!-- x" + " <!-- y" * 5000) == ("", True)


def test_no_entry_of_the_fixture_holds_a_comment_a_suffix_or_a_header() -> None:
    for path in sorted(OPENCLAW_WORKSPACE.rglob("*.md")):
        rel = str(path.relative_to(OPENCLAW_WORKSPACE))
        text = path.read_text(encoding="utf-8")
        for entry in parse_entries(text, rel):
            assert_clean(entry.text)
        for chunk in chunk_markdown(text, rel, count_tokens_batch):
            assert_clean(chunk.embed_text + chunk.context)
    memory = parse_entries((OPENCLAW_WORKSPACE / "MEMORY.md").read_text(encoding="utf-8"))
    assert all(e.start > 6 for e in memory)  # the front matter is lines 1-6
    assert "Invoices are generated nightly by the billing-cron job at 02:00 UTC." in {
        e.text.split(" Source:")[0] for e in memory
    }


# -- search and injection over the fixture --


def test_the_facts_rank_first_and_noise_never_surfaces(engine: MemoryEngine) -> None:
    for question, location in FACTS.items():
        results = engine.search(question, now=NOW, min_score=0.0, max_results=30).results
        assert results[0].location == location, (question, [r.location for r in results[:3]])
        for result in results:
            assert_clean(result.text)
            assert not (result.path == SESSION and result.start_line < 9), result.location
            via = result.breakdown.neighbour_via or ""
            assert not via.startswith(f"{SESSION}#L") or via == f"{SESSION}#L9-12"


def test_comments_suffixes_front_matter_and_headers_are_not_in_the_index(
    engine: MemoryEngine,
) -> None:
    # Words that occur in the fixture only inside comments, suffixes, the front matter or a
    # session header: no chunk holds them (the header bullets are no chunk, so no vector).
    for word in ("openclaw", "dreaming", "trigger", "importance", "avg", "curated"):
        assert engine.index.doc_count(word) == 0, word
    for word in ("telegram", "webchat", "6f1c2a9e", "4471"):
        assert engine.index.doc_count(word) == 0, word
    assert engine.index.doc_count("sqitch") > 0
    locations = {c.location for c in engine.index.iter_chunks(SESSION)}
    assert locations == {f"{SESSION}#L9-12"}


def test_bm25_search_and_the_injection_as_processes_hold_no_noise(tmp_path: Path) -> None:
    root = copy_openclaw_workspace(tmp_path)
    env = memdeck_env(None, tmp_path)
    for query in ("orders API pagination", "telegram webchat", "openclaw dreaming importance"):
        found = run_memdeck(
            ["--workspace", str(root), "search", "--bm25", "--json", "--now", "2026-03-10", query],
            env,
        )
        assert found.returncode == 0, found.stderr
        results = json.loads(found.stdout)["results"]
        for result in results:
            assert_clean(result["text"])
        if query == "orders API pagination":
            assert (results[0]["path"], results[0]["start_line"]) == (SESSION, 9)
        else:
            assert results == [], results
    injected = run_memdeck(
        [
            "--workspace",
            str(root),
            "inject",
            "--bm25",
            "--now",
            "2026-03-10",
            "orders API pagination",
        ],
        env,
    )
    assert injected.returncode == 0, injected.stderr
    notes = injected.stdout
    assert "<memory-notes>" in notes and "orders API paginates with a cursor" in notes
    assert "Invoices are generated nightly by the billing-cron job at 02:00 UTC." in notes
    block = notes[
        notes.index("<memory-notes>") + len("<memory-notes>") : notes.index("</memory-notes>")
    ]
    assert_clean(block)
    assert "read_when" not in block and "title:" not in block


def test_indexing_and_searching_leave_the_files_as_they_were(engine: MemoryEngine) -> None:
    root = engine.workspace.root
    engine.search("orders API pagination", now=NOW)
    engine.inject("orders API pagination", now=NOW)
    assert fixture_bytes(root) == fixture_bytes(OPENCLAW_WORKSPACE)
