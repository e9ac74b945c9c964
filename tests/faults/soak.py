"""Soak for issue 8, "Trust the files" (a script, not collected by pytest).

(a) Hand edits racing app writes: a separate process saves MEMORY.md the way editors do
    (temp file + rename, and in place), ``--saves`` times, while this process runs
    save_memory / forget_memory in a loop. Prints the editor saves lost (target 0).
(b) kill -9 during flushes: ``memdeck flush`` processes against the fake server, SIGKILLed at
    random moments until ``--kills`` of them interrupted a flush (kills after it finished are
    counted apart), each followed by new messages and another flush.
    Prints the messages lost / duplicated in the daily log and facts lost / duplicated in
    MEMORY.md (targets 0 / 0).

    .venv/bin/python tests/faults/soak.py [--saves 1000] [--kills 20] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.chat_support import is_summary_request, memdeck_env, start_memdeck  # noqa: E402
from support.fakeopenai import FakeOpenAI, Reply  # noqa: E402

from tui.chat.sessions import SessionStore  # noqa: E402
from tui.chat.tools import MemoryTools  # noqa: E402
from tui.engine import fileio  # noqa: E402
from tui.engine.engine import MemoryEngine  # noqa: E402
from tui.engine.workspace import Workspace  # noqa: E402

EDITOR_MARK = "editor save {} kiwi"


# -- (a) editor saves racing app writes --


def run_editor(path: Path, saves: int, seed: int) -> None:
    """The "editor" process: read, add a line, save (alternately tmp+rename and in place)."""
    rng = random.Random(seed)
    for number in range(saves):
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            data += b"\n"
        data += f"- {EDITOR_MARK.format(number)}\n".encode()
        if number % 2:
            tmp = path.with_name(f".editor-{os.getpid()}.swp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        else:
            with open(path, "wb") as handle:  # O_TRUNC, then write: an in-place save
                handle.write(data)
        time.sleep(rng.uniform(0, 0.008))


def race(saves: int, seed: int, *, exchange: bool) -> dict[str, Any]:
    """Part (a) in one swap mode; returns the figures."""
    fileio.RENAME_EXCHANGE_ENABLED = exchange
    with tempfile.TemporaryDirectory(prefix="memdeck-soak-") as tmp:
        root = Path(tmp) / "ws"
        (root / "memory").mkdir(parents=True)
        memory_md = root / "MEMORY.md"
        memory_md.write_text("# Long-term Memory\n\n- My dog is Max\n")
        memory = MemoryEngine(Workspace.open(root))
        tools = MemoryTools(memory)
        editor = subprocess.Popen(
            [sys.executable, __file__, "--editor", str(memory_md), str(saves), str(seed)]
        )
        saved = forgotten = failed = 0
        errors: list[str] = []
        number = 0
        started = time.monotonic()
        try:
            while editor.poll() is None:
                number += 1
                result = tools.execute("save_memory", {"content": f"Soak fact {number} zebra"})
                saved += result.ok
                if not result.ok:
                    failed += 1
                    errors.append(str(result.content.get("message")))
                if number % 2 == 0:
                    query = f"Soak fact {number - 1} zebra"
                    result = tools.execute("forget_memory", {"query": query})
                    forgotten += result.ok
                    if not result.ok:
                        failed += 1
                        errors.append(str(result.content.get("message")))
        finally:
            editor.wait()
            memory.close()
        seconds = time.monotonic() - started
        text = memory_md.read_text(encoding="utf-8", errors="replace")
        lost = [n for n in range(saves) if f"- {EDITOR_MARK.format(n)}\n" not in text]
        history = (root / ".memdeck" / "history.jsonl").read_text(encoding="utf-8")
        conflicts = sum(
            json.loads(line)["event"] == "write_conflict" for line in history.splitlines()
        )
    fileio.RENAME_EXCHANGE_ENABLED = True
    return {
        "mode": "renameat2 exchange" if exchange else "re-check fallback",
        "editor_saves": saves,
        "editor_saves_lost": len(lost),
        "lost_examples": lost[:5],
        "app_saves": saved,
        "app_forgets": forgotten,
        "app_errors": failed,
        "app_error_examples": sorted(set(errors))[:3],
        "conflicts_recorded": conflicts,
        "seconds": round(seconds, 1),
    }


# -- (b) kill -9 during flushes --

_MESSAGE = re.compile(r"message (\d+) about topic")


class NumberedSummaries:
    """Summaries that name every message they cover; one fact per user message."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def __call__(self, body: dict[str, Any]) -> Reply | None:
        if not is_summary_request(body):
            return None
        time.sleep(self.rng.uniform(0, 0.05))
        numbers = [int(n) for n in _MESSAGE.findall(str(body["messages"][-1]["content"]))]
        summary = "\n".join(f"- covered msg#{n}#" for n in numbers)
        facts = "\n".join(f"- Soak fact for msg#{n}#" for n in numbers if n % 2) or "None"
        return FakeOpenAI.text(f"## Daily Summary\n{summary}\n\n## Long-term Facts\n{facts}\n")


def kills(target: int, seed: int) -> dict[str, Any]:
    """Part (b); returns the figures."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="memdeck-soak-") as tmp:
        root = Path(tmp) / "ws"
        store = SessionStore(Workspace.open(root))
        session = store.create("kill soak").id
        total = 0
        killed = finished = 0
        where: dict[str, int] = {}  # what each kill interrupted, read from the transcript
        with FakeOpenAI(responder=NumberedSummaries(rng)) as server:
            env = memdeck_env(server, Path(tmp))
            args = ["--workspace", str(root), "flush", session]
            requests = 0
            while sum(n for p, n in where.items() if p != "after done") < target:
                for _ in range(rng.randint(1, 3)):  # new conversation since the last flush
                    total += 1
                    role = "user" if total % 2 else "assistant"
                    store.append_message(session, role, f"message {total} about topic{total}")
                process = start_memdeck(args, env)
                try:
                    server.wait_for_requests(requests + 1, timeout=30)
                    time.sleep(rng.uniform(0, 0.15))  # somewhere in steps 3-7, or after
                except TimeoutError:
                    pass
                process.send_signal(signal.SIGKILL)
                process.communicate(timeout=30)
                requests = len(server.chat_requests)
                if process.returncode == -signal.SIGKILL:
                    killed += 1
                    transcript = store.load(session)
                    if transcript.pending_flush() is not None:
                        point = "between prepared and done (steps 4-7)"
                    elif transcript.unlogged_messages():
                        point = "before prepared (waiting for or reading the answer)"
                    else:
                        point = "after done"
                    where[point] = where.get(point, 0) + 1
                else:
                    finished += 1
            final = start_memdeck(args, env)
            out, err = final.communicate(timeout=60)
            if final.returncode != 0:
                raise SystemExit(f"the final flush failed: {out}{err}")
        daily = "".join(p.read_text() for p in sorted((root / "memory").glob("*.md")))
        memory_md = (root / "MEMORY.md").read_text()
        transcript = store.load(session)
        pending = transcript.pending_flush()
        last_logged = transcript.last_logged_message_id
    logged = [daily.count(f"covered msg#{n}#") for n in range(1, total + 1)]
    facts = [memory_md.count(f"Soak fact for msg#{n}#") for n in range(1, total + 1, 2)]
    return {
        "kills": killed,
        "kills_mid_flush": sum(n for p, n in where.items() if p != "after done"),
        "kills_by_point": where,
        "flushes_that_finished_before_the_kill": finished,
        "messages": total,
        "messages_lost": sum(c == 0 for c in logged),
        "messages_duplicated": sum(c > 1 for c in logged),
        "facts_lost": sum(c == 0 for c in facts),
        "facts_duplicated": sum(c > 1 for c in facts),
        "pending_flush_left": pending is not None,
        "pointer_at_last_message": last_logged == transcript.messages[-1].id,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saves", type=int, default=1000, help="editor saves in part (a)")
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs in part (b)")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--editor", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.editor:
        run_editor(Path(args.editor[0]), int(args.editor[1]), int(args.editor[2]))
        return 0
    print(f"seed {args.seed}")
    results = [race(args.saves, args.seed, exchange=mode) for mode in (True, False)]
    for result in results:
        print("(a) hand edits vs app writes:", json.dumps(result))
    result_b = kills(args.kills, args.seed)
    print("(b) kill -9 during flushes:", json.dumps(result_b))
    bad = any(r["editor_saves_lost"] for r in results[:1]) or any(
        result_b[k]
        for k in ("messages_lost", "messages_duplicated", "facts_lost", "facts_duplicated")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
