"""Chunker: Markdown structure, sizes that fit the model window, line ranges that cover the file."""

from __future__ import annotations

from datetime import date

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tui.engine.chunker import Chunk, ChunkParams, chunk_markdown
from tui.engine.embeddings import count_tokens_batch
from tui.engine.markdown import parse_heading

WINDOWS = ChunkParams(units=False)


def chunks_of(
    text: str, path: str = "MEMORY.md", params: ChunkParams = ChunkParams()
) -> list[Chunk]:
    return chunk_markdown(text, path, count_tokens_batch, params)


def test_headings_split_sections_and_keep_their_path() -> None:
    text = "# Memory\n\n## Pets\n- My dog is Max\n\n## Work\n- Uses pytest\n"
    chunks = chunks_of(text, params=WINDOWS)
    assert [c.heading for c in chunks] == ["Memory > Pets", "Memory > Work"]
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 4)
    assert (chunks[1].start_line, chunks[1].end_line) == (6, 7)
    assert chunks[1].embed_text.startswith("Memory\n## Work")


def test_every_entry_is_a_unit_with_its_heading_path_as_context() -> None:
    text = (
        "# Memory\n\n## Preferences\n- Uses the fish shell\n"
        "- The user likes the colour blue more than any other colour.\n"
        "  - even for terminal themes\n\nA paragraph\nover two lines\n\n## Empty\n## Work\n"
        "```sh\n# not a heading\n```\n"
    )
    chunks = chunks_of(text)
    spans = [(c.start_line, c.end_line) for c in chunks]
    assert spans == [(4, 4), (5, 6), (8, 9), (11, 11), (13, 15)]
    assert chunks[1].text.startswith("- The user likes the colour blue")
    assert chunks[1].embed_text == "Memory > Preferences\n" + chunks[1].text
    assert chunks[3].text == "## Empty"  # a heading with nothing under it is findable
    assert chunks[4].heading == "Memory > Work" and "# not a heading" in chunks[4].text


def test_daily_log_units_carry_the_date_heading() -> None:
    chunks = chunks_of("# 2026-11-20\n\n- Fixed the login bug\n", path="memory/2026-11-20.md")
    assert chunks[0].embed_text == "2026-11-20\n- Fixed the login bug"
    assert chunks[0].date == date(2026, 11, 20)


def test_neighbour_context_is_indexed_beside_the_unit_never_embedded_with_it() -> None:
    chunks = chunks_of("- first\n- second\n", path="memory/2026-11-20.md")
    assert chunks[1].text == "- second"
    assert chunks[1].context == "- first"
    # the vector is the entry's own: a neighbour's words must not make it look relevant
    assert chunks[1].embed_text == "- second"
    # MEMORY.md's entries stand alone: a lone preference is not diluted by its neighbour
    facts = chunks_of("- first\n- second\n")
    assert facts[1].embed_text == "- second" and facts[1].context == ""
    assert ChunkParams(context_entries=0).fingerprint != ChunkParams().fingerprint


def test_no_unit_exceeds_the_window_even_from_a_wall_of_headings() -> None:
    text = "".join(f"## heading {i}\n" for i in range(3000))
    chunks = chunks_of(text)
    assert len(chunks) == 3000
    assert max(count_tokens_batch([c.embed_text for c in chunks])) < 64


def test_heading_parsing_is_linear_on_long_whitespace() -> None:
    import time

    from tui.engine.markdown import parse_heading

    line = "## a" + " " * 100_000 + "x"
    started = time.perf_counter()
    assert parse_heading(line) == (2, "a" + " " * 100_000 + "x")
    assert parse_heading("## title ##") == (2, "title")
    assert parse_heading("#hashtag") is None
    # generous: the old regex took minutes on this line
    assert time.perf_counter() - started < 5


def test_bullets_are_never_split_and_chunks_fit_the_target() -> None:
    bullets = [
        f"- fact number {i} " + "word " * 40 + "\n  continued detail line" for i in range(30)
    ]
    text = "## Facts\n" + "\n".join(bullets) + "\n"
    params = ChunkParams(target_tokens=200, overlap_tokens=32, units=False)
    chunks = chunks_of(text, params=params)
    assert len(chunks) > 3
    for chunk in chunks:
        assert count_tokens_batch([chunk.text])[0] <= params.target_tokens + 2
        # each chunk holds whole bullets: every "- fact" line is followed by its continuation
        lines = chunk.text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("- fact"):
                assert i + 1 < len(lines) and lines[i + 1].startswith("  continued")


def test_consecutive_chunks_overlap_by_whole_blocks() -> None:
    text = "\n".join(f"- item {i} " + "alpha beta gamma " * 8 for i in range(40)) + "\n"
    chunks = chunks_of(text, path="memory/2026-11-20.md", params=WINDOWS)
    assert len(chunks) >= 3
    for first, second in zip(chunks, chunks[1:], strict=False):
        assert second.start_line <= first.end_line  # overlap
        assert second.start_line > first.start_line  # progress


def test_oversized_single_line_is_split_by_words_within_the_window() -> None:
    line = "- " + " ".join(f"token{i}" for i in range(2000))
    chunks = chunks_of(line + "\n")
    assert len(chunks) > 5
    assert all(c.start_line == c.end_line == 1 for c in chunks)
    assert all(count_tokens_batch([c.embed_text])[0] <= 254 for c in chunks)


def test_cjk_line_without_spaces_is_split_by_characters() -> None:
    chunks = chunks_of("我的狗叫旺财" * 200 + "\n")
    assert len(chunks) > 1
    assert all(count_tokens_batch([c.text])[0] <= 200 for c in chunks)


def test_code_fences_keep_hash_lines_as_code() -> None:
    text = "## Snippet\n```python\n# not a heading\nprint('x')\n```\n"
    chunks = chunks_of(text)
    assert len(chunks) == 1
    assert chunks[0].heading == "Snippet"
    assert "# not a heading" in chunks[0].text


def test_dates_and_confidence_come_from_path_and_metadata() -> None:
    daily = chunks_of("- went hiking\n", path="memory/2026/2026-11-03-trip.md")
    assert daily[0].date == date(2026, 11, 3)
    assert daily[0].confidence == "high"  # hand-written: the user's
    flushed = chunks_of(
        "## 10:02 · trip <!-- mem src=auto flush=f1 -->\n- planned the trip\n\n"
        "### Notes\n- nested still the app's\n\n## Mine\n- my own line\n",
        path="memory/2026-11-03.md",
    )
    assert [c.confidence for c in flushed] == ["medium", "medium", "high"]
    fenced = chunks_of(
        "## 10:02 · code <!-- mem src=auto flush=f2 -->\n```sh\nmake test\n```\n",
        path="memory/2026-11-03.md",
    )
    assert [c.confidence for c in fenced] == ["medium"]  # a fence is an entry like any other
    memory = chunks_of("- likes tea <!-- mem id=ab12 conf=medium src=auto at=2026-11-01 -->\n")
    assert memory[0].date is None
    assert memory[0].confidence == "medium"
    assert memory[0].entry_ids == ("ab12",)
    assert "<!--" not in memory[0].text
    assert chunks_of("- hand-written line\n")[0].confidence == "high"


def test_a_memory_md_entry_keeps_the_date_its_metadata_gives() -> None:
    """``date`` stays None (MEMORY.md is evergreen: no decay); ``written`` is what update links
    date the entry with."""
    text = (
        "- likes tea <!-- mem id=ab12 conf=high src=user at=2026-11-01 -->\n"
        "- hand-written line\n"
        "- a long one <!-- mem id=cd34 at=2025-01-02 -->\n"
        "  continued <!-- mem id=ef56 at=2025-03-04 -->\n"
    )
    for params in (ChunkParams(), WINDOWS):
        chunks = chunks_of(text, params=params)
        assert all(c.date is None for c in chunks)
    units = chunks_of(text)
    assert [c.written for c in units] == [date(2026, 11, 1), None, date(2025, 3, 4)]
    assert chunks_of(text, params=WINDOWS)[0].written == date(2026, 11, 1)  # the newest


def test_forgotten_and_superseded_lines_are_not_chunked() -> None:
    text = (
        "- my dog is Max <!-- mem id=1 state=superseded -->\n"
        "- old secret <!-- mem id=2 state=forgotten -->\n"
        "- my dog is Luna <!-- mem id=3 conf=high -->\n"
    )
    chunks = chunks_of(text)
    assert len(chunks) == 1
    assert (
        "Luna" in chunks[0].text and "Max" not in chunks[0].text and "secret" not in chunks[0].text
    )


markdown_line = st.one_of(
    st.just(""),
    st.builds(
        lambda lvl, t: "#" * lvl + " " + t,
        st.integers(1, 4),
        st.text("abc xyz", min_size=1, max_size=20),
    ),
    st.builds(lambda t: "- " + t, st.text("abcdef ghij 狗", min_size=1, max_size=120)),
    st.builds(lambda t: "  " + t, st.text("abc def", min_size=1, max_size=60)),
    st.text("abcdefgh ijk lmn", min_size=1, max_size=300),
    st.just("```"),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(markdown_line, max_size=60))
def test_every_line_is_in_exactly_one_unit_or_its_context(lines: list[str]) -> None:
    text = "\n".join(lines)
    chunks = chunks_of(text, params=ChunkParams(target_tokens=60))
    total = len(text.splitlines())
    owner: dict[int, int] = {}
    for index, chunk in enumerate(chunks):
        assert 1 <= chunk.start_line <= chunk.end_line <= total
        assert chunk.text.strip()
        for number in range(chunk.start_line, chunk.end_line + 1):
            # an oversized line split by words is the same line in several pieces
            assert owner.get(number, index) == index or chunk.start_line == chunk.end_line
            owner[number] = index
    headings_in_context = {
        title for chunk in chunks for title in chunk.heading.split(" > ") if title
    }
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or number in owner:
            continue
        parsed = parse_heading(line)
        assert parsed is not None, f"line {number} {line!r} is in no unit"
        # a heading without a title has no text to lend as context
        assert not parsed[1] or parsed[1] in headings_in_context, f"{line!r} is nobody's context"


@settings(max_examples=60, deadline=None)
@given(st.lists(markdown_line, max_size=60))
@example(
    lines=[
        "# aab ayybxbxb",
        "```",
        "# aabxbxzb",
        "# a aaxbxb",
        "# ayb ayyb",
        "- bdgaaabdgabgdgj",
        "- aaaaaaaaaaaaaaaaaaaa",
    ]
)  # a heading over a block past the target was in no window (found by hypothesis)
def test_chunks_cover_every_line_and_ranges_are_valid(lines: list[str]) -> None:
    text = "\n".join(lines)
    params = ChunkParams(target_tokens=60, overlap_tokens=10, units=False)
    chunks = chunks_of(text, params=params)
    total = len(text.splitlines())
    covered: set[int] = set()
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= total
        covered.update(range(chunk.start_line, chunk.end_line + 1))
        assert chunk.text.strip()
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            assert number in covered, f"line {number} {line!r} is in no chunk"
