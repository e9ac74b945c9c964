"""Memory benchmark: what streamed answers leave behind once they are gone.

    .venv/bin/python tests/bench/answers_memory.py [--answers 40] [--every 10]

A script, not a test: it prints figures and asserts nothing. The chat's message widget runs
headless (``App.run_test()``): ``--answers`` answers (a heading, a paragraph, twelve list items
and a code block) are streamed into new messages, twelve characters a write as the app writes
a stream, each finished (its segments folded into pictures); every ``--every`` answers the
messages are removed and garbage collected, then the widgets still alive, the segments' Markdown
still alive and the process's peak RSS are printed. A chat that lets go of what it no longer
shows holds the same number of widgets after 10 answers as after 40.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

ANSWER = (
    "# Plan\n\nSome words here and there, long enough to wrap once at this width.\n\n"
    + "".join(f"- item {i} with a few words\n" for i in range(12))
    + "\n```python\nprint('x')\n```\n\nThe end.\n"
)
WRITE = 12


async def run(answers: int, every: int) -> None:
    from support.pilot import PanelHost
    from textual.containers import VerticalScroll
    from textual.widget import Widget

    from tui.app.widgets.chat_markdown import ChatMarkdown
    from tui.app.widgets.chat_message import ChatMessage

    app = PanelHost(lambda: VerticalScroll())
    async with app.run_test(size=(80, 40)) as pilot:
        log = app.query_one(VerticalScroll)
        print("answers  widgets alive  segment Markdown alive  peak RSS")
        for n in range(1, answers + 1):
            message = ChatMessage("assistant")
            await log.mount(message)
            for start in range(0, len(ANSWER), WRITE):
                await message.append_text(ANSWER[start : start + WRITE])
                await pilot.pause()
            await message.finish()
            await pilot.pause()
            if n % every == 0:
                await log.remove_children()
                await pilot.pause()
                widgets, markdown = alive(Widget), alive(ChatMarkdown)
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
                print(f"{n:7d}  {widgets:13,d}  {markdown:22d}  {peak:5d} MB")


def alive(kind: type) -> int:
    """How many objects of ``kind`` are alive after a full collection (the list of all objects
    is let go before returning: kept, it would keep this count's objects alive to the next)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=40)
    parser.add_argument("--every", type=int, default=10, help="answers between two counts")
    args = parser.parse_args(argv)
    asyncio.run(run(args.answers, max(1, args.every)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
