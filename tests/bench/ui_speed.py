"""TUI benchmark: start-up to first frame, keystroke to injection preview, a streamed answer.

    .venv/bin/python tests/bench/ui_speed.py [--chunks 10000] [--runs 1] [--frame-runs 5]
        [--keys 50] [--tokens 2000] [--rates 200,50] [--index-lines 3000]
        [--parts frame,first,preview,stream,index] [--stacks]

A script, not a test: it prints its figures with the targets beside them and asserts nothing.
The machine may be shared: the load average is printed at the start and the end. ``--runs N``
runs everything N times in a row; each run ends with the table of its worst stalls (the
issue's rows, with the load at its start and end), and the last lines are all runs' table. A
stall counts as "working" when the event loop's own thread ran for more than the target during
it (its CPU time): on a busy machine the other stalls are mostly waits for a CPU.

What is measured, exactly:

* **First frame** — ``python -m tui --workspace WS`` is started in a pseudo-terminal
  (160×48) and its output read until the screen's header ("memdeck · ...") and footer
  ("help") have both been written: the first complete frame a user sees. The clock starts just
  before the process is spawned, so interpreter start-up and every import are included. The
  workspace is the big one below (its index already exists; the sync runs after the frame).
  That first frame is the app's own screen with the header and footer, while the chat engine
  and the memory panels load in a thread; the time until they are on screen too ("whole main
  screen": the session list, the Inject tab and the message box) is printed beside it.
* **Keystroke → preview** — in-process, headless (``App.run_test``), the real app on the
  N-chunk workspace with the embedding model loaded (hybrid search: BM25 + query embedding +
  vectors). A sentence is typed one key at a time, at a human pace (a key every 200 ms, beyond
  the preview debounce): each key is posted to the app as the terminal driver posts it (a
  ``Key`` event; the Pilot's ``press`` adds ~100 ms of its own waiting, so it is not used for
  timing). Each latency runs from the key event to the moment the Inject panel holds the
  preview built for exactly that draft (the panel's ``injection`` is the object the engine
  returned for it); rendering that widget is not included. Seven warm-up keys are not
  counted. The engine's share (``ChatEngine.preview_injection`` alone, on the UI thread,
  nothing else running) is timed too. Then a burst (a key every 30 ms) is timed from its last
  key to the preview of the whole draft.
* **First answer** (``first``) — the first answer of the fresh in-process app, once it is ready:
  a short message typed at a human pace (the first key starts the app's warm-up of the chat
  client, as it does for a user), then Enter; timed from the Enter key to the first piece
  received (the later answers of **Streaming** are the reference).
* **Streaming** — the fake OpenAI server streams an answer of ``--tokens`` pieces (words,
  Markdown lists, a code block: list-heavy Markdown, the costliest to lay out) at each of
  ``--rates`` tokens/s, each into a new session, its message typed at a human pace (as in
  **First answer**: a fresh app's first key warms the chat client). Timed: Enter to the first
  piece received by the app; first to last piece received (beside the server's own pacing: a UI that
  renders too slowly starves the event loop that reads the stream, so this is where "falling
  behind" shows); last piece to the whole text on screen (the widgets hold it and the screen
  has been painted once since; later folding of finished text is not counted); the largest
  backlog between what arrived and what the widgets had; the worst event-loop stall (a 10 ms
  ticker), and the full garbage collections that ran meanwhile (the app defers them to quiet
  moments: ``tui/app/gc_pacer.py``). The rendered text counts folded parts (``FoldedText``).
* **Indexing** — with the app's workspace watcher on, a daily log of ``--index-lines`` lines
  (about one ``##`` entry per 9 lines) is written into ``memory/`` while the app runs; the
  watcher syncs it (full text, then vectors) and every panel refreshes (the Daily tree lists
  the ~1,000 logs again). Timed: the write to the file being searchable (full text) and
  embedded, the worst event-loop stall over that whole time (idle UI), then again while an
  answer streams at the first of ``--rates`` (the file is written as the first token arrives;
  the ticker runs until both are done). The file is removed afterwards (and unindexed).

``--chunks N`` is the workspace's size in indexed units (the entries the index holds, each one
embedded): the generated daily logs index as about 67 units each, so the default 10,000 is
about 150 logs. The workspace is generated once and indexed with the real model (slow the
first time), then kept in ``/tmp/memdeck-bench-tui/ws-units-N`` (``--rebuild`` regenerates it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import gc
import os
import pty
import random
import re
import select
import shutil
import statistics
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_words import FILLER_WORDS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.fakeopenai import FakeOpenAI  # noqa: E402

from tui.chat.config import load_config  # noqa: E402

if TYPE_CHECKING:  # the app and Textual load where the bench times them
    from textual.pilot import Pilot

    from tui.app.app import MemdeckApp
    from tui.app.panels.injection_panel import InjectionPanel
    from tui.chat.chat import ChatEngine
    from tui.engine.inject import Injection

CACHE = Path("/tmp/memdeck-bench-tui")
SIZE = (160, 48)
TARGET_FIRST_FRAME_S = 0.8
TARGET_PREVIEW_P95_MS = 150.0
TARGET_STALL_MS = 50.0
TARGET_FIRST_ANSWER_MS = 250.0
HUMAN_KEY_GAP_S = 0.2
#: Sections in a generated daily log, and the units (entries) such a log indexes as (measured:
#: 60 logs made 3,999 units).
SECTIONS_PER_LOG = 10
UNITS_PER_LOG = 66.6
BURST_KEY_GAP_S = 0.03
SENTENCE = "where did we decide to stay for the lisbon conference"

_WORDS = (
    FILLER_WORDS
    + (
        "kitchen renovation tiles plumber quote thursday piano lessons daughter recital sunday "
        "marathon training interval runs knee physio stretching climbing gym bouldering grades"
    ).split()
)


# -- helpers --


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    low, high = int(rank), min(int(rank) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def verdict(ok: bool) -> str:
    return "✓ meets target" if ok else "✗ misses target"


def bench_env(server: FakeOpenAI | None) -> dict[str, str]:
    """The environment of a memdeck process: no user config, no keys, the fake server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMDECK_"))}
    env["MEMDECK_CONFIG"] = str(CACHE / "no-config.toml")
    env["TERM"] = "xterm-256color"
    env["COLUMNS"], env["LINES"] = str(SIZE[0]), str(SIZE[1])
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
        env["MEMDECK_MODEL"] = "fake-model"
    return env


class ServerProcess:
    """``tests/support/fakeopenai.py`` in its own process: its pacing must not share the GIL (and the
    CPU time) of the app being measured, or a busy UI slows the server down and hides its own
    lag."""

    def __init__(self) -> None:
        import json

        # Flush summaries fail on purpose: the cached workspace must not grow from run to run.
        script = CACHE / "server-script.json"
        rule = {"system_contains": "memory extraction assistant", "reply": {"error": 503}}
        script.write_text(json.dumps({"rules": [rule]}), encoding="utf-8")
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "support" / "fakeopenai.py"),
                "--port",
                "0",
                "--script",
                str(script),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()

    def enqueue(self, *replies: dict[str, Any]) -> None:
        """Queue replies (their JSON script form) through the control URL."""
        import json
        import urllib.request

        root = self.base_url.removesuffix("/v1")
        request = urllib.request.Request(
            f"{root}/_fake/replies",
            data=json.dumps(list(replies)).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


# -- the workspace --


def _section(rng: random.Random, day: date, number: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(90, 130))]
    lines = []
    for start in range(0, len(words), 18):
        lines.append("- " + " ".join(words[start : start + 18]).capitalize() + ".")
    return f"## {day.isoformat()} · session {number}\n\n" + "\n".join(lines) + "\n"


def build_workspace(chunks: int, rebuild: bool) -> Path:
    """A workspace of about ``chunks`` indexed units (entries), indexed with the real model
    (cached in /tmp). A generated daily log of :data:`SECTIONS_PER_LOG` sections indexes as
    about :data:`UNITS_PER_LOG` units (each bullet line is an entry), so ``chunks`` units take
    ``chunks / UNITS_PER_LOG`` logs; the exact count is printed once indexed."""
    from tui.engine.engine import MemoryEngine

    root = CACHE / f"ws-units-{chunks}"
    marker = root / ".memdeck" / "bench-complete"
    if rebuild and root.exists():
        shutil.rmtree(root)
    if marker.exists():
        return root
    rng = random.Random(chunks)
    (root / "memory").mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text(
        "# Long-term Memory\n\n## Preferences\n- Prefers dark mode in every editor\n"
        "- Likes short answers with code first\n\n## Work\n"
        "- Speaking at the Lisbon conference in March; the team stays at a hotel near Alfama\n",
        encoding="utf-8",
    )
    per_file = SECTIONS_PER_LOG
    start = date(2024, 1, 1)
    for index in range(max(1, round(chunks / UNITS_PER_LOG))):
        day = start + timedelta(days=index)
        text = f"# {day.isoformat()}\n\n" + "\n".join(
            _section(rng, day, n) for n in range(1, per_file + 1)
        )
        (root / "memory" / f"{day.isoformat()}.md").write_text(text, encoding="utf-8")
    print(f"  indexing about {chunks:,} units with the real model (once; cached in {root}) …")
    began = time.perf_counter()
    engine = MemoryEngine(root)
    engine.load_model()
    engine.sync()
    stats = engine.stats()
    engine.close()
    marker.write_text(f"{stats['chunks']} chunks\n")
    print(f"  indexed {stats['chunks']:,} units in {time.perf_counter() - began:.0f} s")
    return root


# -- first frame --

_ANSI = re.compile(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[PX^_].*?\x1b\\|\x1b.")


def first_frame_once(
    workspace: Path, env: dict[str, str], timeout: float = 30.0
) -> tuple[float, float, float]:
    """Seconds from spawn to the first byte, to the first full frame (header + footer), and to
    the whole main screen (session list, chat and memory panels mounted)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "tui", "--workspace", str(workspace)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    first_byte = frame = full = float("nan")
    try:
        while time.perf_counter() - began < timeout:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            now = time.perf_counter() - began
            if not seen:
                first_byte = now
            seen += data
            plain = _ANSI.sub(b"", seen)
            if frame != frame and b"memdeck" in plain and b"help" in plain:  # nan: not yet
                frame = now
            if b"Sessions" in plain and b"Inject" in plain and b"message" in plain:
                full = now
                break
        os.write(master, b"\x11")  # ctrl+q: quit (nothing to flush: no session was used)
        deadline = time.monotonic() + 20
        while process.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if select.select([master], [], [], 0.05)[0]:
                    os.read(master, 65536)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        os.close(master)
    return first_byte, frame, full


def bench_first_frame(workspace: Path, runs: int, server: FakeOpenAI) -> None:
    env = bench_env(server)
    python_start = []
    imports = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        python_start.append(time.perf_counter() - began)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import tui.app.app"], env=env, cwd=ROOT, check=True)
        imports.append(time.perf_counter() - began)
    first_frame_once(workspace, env)  # warm the OS page cache and .pyc files once
    results = [first_frame_once(workspace, env) for _ in range(runs)]
    frames = [frame for _, frame, _ in results]
    bytes_ = [first for first, _, _ in results]
    fulls = [full for _, _, full in results]
    median = statistics.median(frames)
    print(f"\nFirst frame (process spawn → header and footer on the pty), {runs} runs")
    print(f"  python -c pass                 median {statistics.median(python_start):.3f} s")
    print(f"  python -c 'import tui.app.app' median {statistics.median(imports):.3f} s")
    print(f"  first byte on the terminal     median {statistics.median(bytes_):.3f} s")
    print(
        f"  first full frame               median {median:.3f} s  (min {min(frames):.3f}, "
        f"max {max(frames):.3f})  target ≤ {TARGET_FIRST_FRAME_S} s  "
        f"{verdict(median <= TARGET_FIRST_FRAME_S)}"
    )
    print(
        f"  whole main screen              median {statistics.median(fulls):.3f} s  "
        "(sessions, chat and panels mounted: the engine opens after the first frame)"
    )


# -- preview and streaming (in-process, headless) --


async def _wait(condition: Callable[..., object], timeout: float = 30.0) -> None:
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.001)


async def painted(app: MemdeckApp) -> None:
    """Return once the screen has been refreshed (laid out and painted) after this call: the
    screen runs its callbacks after the layout and paint it has pending. (It does not ask for a
    repaint of its own: a whole-screen repaint, which no user action makes, landed in the
    ticker's last tick of every stream, 10-45 ms of the worst stall until 2026-11-26.)"""
    done = asyncio.get_running_loop().create_future()

    def finish() -> None:
        if not done.done():
            done.set_result(None)

    app.screen.call_after_refresh(finish)
    await done


def stream_pieces(tokens: int) -> list[str]:
    """``tokens`` pieces of Markdown: paragraphs, a list, a code block, repeated."""
    rng = random.Random(tokens)
    pieces: list[str] = []
    while len(pieces) < tokens:
        pieces += [rng.choice(_WORDS) + " " for _ in range(60)]
        pieces.append("\n\n")
        for _ in range(5):
            pieces.append("- ")
            pieces += [rng.choice(_WORDS) + " " for _ in range(8)]
            pieces.append("\n")
        pieces += [
            "\n```python\n",
            "def ",
            "flush",
            "(session):\n",
            "    return ",
            "None\n",
            "```\n\n",
        ]
    return pieces[:tokens] + ["\n"]


#: ``--stacks``: sample the event loop's stack every 2 ms and, after each run, print where it
#: was during the stalls over the target it spent running (a diagnosis, not a figure).
STACKS = False


class StackSampler:
    """The main thread's stack, every 2 ms, from a background thread (``sys._current_frames``)."""

    def __init__(self) -> None:
        import threading

        self.samples: list[tuple[float, tuple[str, ...]]] = []
        self._main = threading.main_thread().ident
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            frame = sys._current_frames().get(self._main or 0)  # noqa: SLF001
            where: list[str] = []
            while frame is not None and len(where) < 40:
                code = frame.f_code
                where.append(f"{Path(code.co_filename).name}:{code.co_name}")
                frame = frame.f_back
            self.samples.append((time.perf_counter(), tuple(where)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def report(self, windows: list[tuple[float, float]], top: int = 45) -> str:
        """The functions most often on the stack during ``windows`` (inclusive shares)."""
        from collections import Counter

        inside = [w for t, w in self.samples if any(a <= t <= b for a, b in windows)]
        if not inside:
            return "    (no stack samples inside the stalls)"
        counts = Counter(name for where in inside for name in set(where))
        lines = [f"    stack samples during {len(windows)} stalls: {len(inside)}"]
        lines += [f"    {n / len(inside):5.0%}  {name}" for name, n in counts.most_common(top)]
        return "\n".join(lines)


class StallMeter:
    """A 10 ms ticker on the event loop: the worst delay beyond its 10 ms is the worst stall
    (the UI could not react for that long). ``sample`` is called every 100 ms (on the loop)."""

    def __init__(self, sample: Callable[[], None] | None = None) -> None:
        self.stalls: list[float] = []
        #: When each tick ran (perf_counter), for ``--stacks``.
        self.ticks: list[float] = []
        self.sampler: StackSampler | None = None
        #: CPU seconds the process (all its threads) used during each tick.
        self.cpu: list[float] = []
        #: CPU seconds the event loop's own thread used during each tick: a stall it spent
        #: running is work; one it spent waiting is the GIL or a busy machine.
        self.loop_cpu: list[float] = []
        self._sample = sample
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Seconds each full (generation 2) garbage collection took while ticking.
        self.full_collections: list[float] = []
        self._gc_began = 0.0

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_began = time.perf_counter()
        else:
            self.full_collections.append(time.perf_counter() - self._gc_began)

    def start(self) -> StallMeter:
        gc.callbacks.append(self._on_gc)
        if STACKS:
            self.sampler = StackSampler()
        self._task = asyncio.create_task(self._tick())
        return self

    async def stop(self) -> float:
        """Stop ticking; the worst stall in milliseconds."""
        self._stop.set()
        if self._task is not None:
            await self._task
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self.sampler is not None:
            self.sampler.stop()
        return self.worst_ms

    def stall_windows(self, ms: float) -> list[tuple[float, float]]:
        """``(start, end)`` of each tick that came more than ``ms`` late with the loop's thread
        running for at least half of it (on a busy machine the others are mostly waits)."""
        return [
            (self.ticks[i] - stall - 0.01, self.ticks[i])
            for i, stall in enumerate(self.stalls)
            if stall * 1000 > ms and self.loop_cpu[i] >= stall / 2
        ]

    @property
    def worst_ms(self) -> float:
        return max(self.stalls or [0.0]) * 1000

    def over(self, ms: float) -> int:
        """How many ticks came more than ``ms`` late."""
        return sum(1 for stall in self.stalls if stall * 1000 > ms)

    def worked_over(self, ms: float) -> int:
        """How many ticks came more than ``ms`` late with the loop's thread running for more
        than ``ms`` of it (work, not a wait for the CPU or the GIL)."""
        return sum(
            1
            for stall, cpu in zip(self.stalls, self.loop_cpu, strict=True)
            if stall * 1000 > ms and cpu * 1000 > ms
        )

    async def _tick(self) -> None:
        last = time.perf_counter()
        last_cpu = time.process_time()
        last_loop_cpu = time.thread_time()
        ticks = 0
        while not self._stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            cpu = time.process_time()
            loop_cpu = time.thread_time()
            self.stalls.append(now - last - 0.01)
            self.ticks.append(now)
            self.cpu.append(cpu - last_cpu)
            self.loop_cpu.append(loop_cpu - last_loop_cpu)
            last, last_cpu, last_loop_cpu = now, cpu, loop_cpu
            ticks += 1
            if self._sample is not None and not ticks % 10:
                self._sample()


def stall_line(label: str, meter: StallMeter) -> str:
    worst = meter.worst_ms
    line = (
        f"  worst event-loop stall {label} {worst:.0f} ms  "
        f"({meter.over(TARGET_STALL_MS)} ticks over {TARGET_STALL_MS:.0f} ms, of {len(meter.stalls):,})  "
        f"target ≤ {TARGET_STALL_MS:.0f} ms  {verdict(worst <= TARGET_STALL_MS)}"
    )
    if meter.stalls:
        # On a shared machine a stall may be the process waiting for a CPU, not work: the CPU
        # time the process used during the worst tick tells them apart.
        at = meter.stalls.index(max(meter.stalls))
        line += (
            f"\n    (the worst tick ended {sum(meter.stalls[: at + 1]) + 0.01 * (at + 1):.1f} s in; "
            f"the process used {meter.cpu[at] * 1000:.0f} ms of CPU during it, the event loop's "
            f"thread {meter.loop_cpu[at] * 1000:.0f} ms; ticks over {TARGET_STALL_MS:.0f} ms "
            f"the loop's thread spent running: {meter.worked_over(TARGET_STALL_MS)})"
        )
    collections = meter.full_collections
    line += f"\n    full garbage collections meanwhile: {len(collections)}" + (
        f", the longest {max(collections) * 1000:.0f} ms" if collections else ""
    )
    if meter.sampler is not None:
        line += "\n" + meter.sampler.report(meter.stall_windows(TARGET_STALL_MS))
    return line


def _time_appends() -> tuple[list[float], Any]:
    """Note when each streamed piece reaches a chat message: ``(times, the original method)``
    (put it back with ``ChatMessage.append_text = original`` when done)."""
    from tui.app.widgets.chat_message import ChatMessage

    received: list[float] = []
    original = ChatMessage.append_text

    async def timed_append(self: ChatMessage, delta: str) -> None:
        received.append(time.perf_counter())
        await original(self, delta)

    ChatMessage.append_text = timed_append  # type: ignore[method-assign]
    return received, original


async def stream_once(
    app: MemdeckApp,
    pilot: Pilot[Any],
    server: ServerProcess,
    tokens: int,
    gap: float,
    *,
    on_first_token: Callable[[], None] | None = None,
    until: Callable[[], bool] | None = None,
    label: str = "",
) -> StallMeter:
    """Stream one answer of ``tokens`` pieces ``gap`` seconds apart into a new session.

    ``on_first_token`` is called once the first piece arrived; the ticker runs until the answer
    is rendered and ``until()`` (if given) holds. Returns the stall meter."""
    from textual import events
    from textual.widgets import Markdown

    from tui.app.widgets.chat_message import ChatMessage
    from tui.app.widgets.folded_text import FoldedText

    main = app.main_screen
    session = main.active_session
    main.action_new_session()
    await _wait(lambda: main.active_session not in (None, session) and not main.chat_pane.messages)
    # As a user sees it before typing: the new session listed, and that list on screen (the
    # list read in a worker was drawn in the frame of the send when the message went at once).
    await _wait(lambda: any(info.id == main.active_session for info in main.session_list.infos))
    await painted(app)
    pieces = stream_pieces(tokens)
    full = "".join(pieces)
    server.enqueue({"text": pieces, "chunk_delay": gap})
    received, original = _time_appends()
    backlog: list[int] = []

    def shown(message: ChatMessage) -> str:
        return message.shown_text()

    def sample_backlog() -> None:
        # the backlog needs a DOM query: sampled every 100 ms only
        if until is not None:
            until()  # it may note the time things happened
        messages = main.chat_pane.messages
        if messages and messages[-1].role == "assistant":
            backlog.append(len(messages[-1].text) - len(shown(messages[-1])))

    # Typed, as every message is (the first key of a fresh app's first one warms the client)
    await type_message(app, "stream please")
    meter = StallMeter(sample_backlog).start()
    finished = main.chat_pane.turns_finished
    t_send = time.perf_counter()
    app.post_message(events.Key("enter", "\r"))
    if on_first_token is not None:
        await _wait(lambda: received, 60)
        on_first_token()
    await _wait(lambda: len(received) >= len(pieces) - 1, 600)
    t_last = received[-1]

    def rendered() -> bool:
        messages = main.chat_pane.messages
        return main.chat_pane.turns_finished > finished and shown(messages[-1]) == full

    await _wait(rendered, 120)
    await painted(app)
    t_done = time.perf_counter()
    if until is not None:
        await _wait(until, 600)
    await meter.stop()
    ChatMessage.append_text = original  # type: ignore[method-assign]
    first = received[0]
    pacing = tokens * gap
    print(f"Streaming {tokens:,} tokens {gap * 1000:.0f} ms apart ({1 / gap:.0f} tokens/s){label}")
    print(f"  send → first token received    {(first - t_send) * 1000:7.0f} ms")
    print(
        f"  first → last token received    {(t_last - first) * 1000:7.0f} ms  "
        f"(the server's pacing alone: {pacing * 1000:.0f} ms; "
        f"{'keeps up' if t_last - first <= pacing * 1.15 else 'falls behind'})"
    )
    print(f"  last token → fully rendered    {(t_done - t_last) * 1000:7.0f} ms")
    print(f"  send → fully rendered          {(t_done - t_send) * 1000:7.0f} ms")
    print(f"  largest backlog (received, not yet in the widget) {max(backlog or [0]):,} chars")
    print(stall_line("during the stream", meter))
    shown_text = shown(main.chat_pane.messages[-1])
    fences = shown_text.count("```")
    print(
        f"  rendered text identical to the answer: {shown_text == full} "
        f"({len(main.chat_pane.messages[-1].query_children(Markdown))} Markdown segments"
        f" and {len(main.chat_pane.messages[-1].query_children(FoldedText))} folded, "
        f"{fences // 2} code fences closed{'' if fences % 2 == 0 else ', one left open'})"
    )
    return meter


def big_log(lines: int, seed: int = 3000) -> str:
    """A daily log of about ``lines`` lines: ``##`` entries of bullet lines."""
    rng = random.Random(seed)
    day = date(2030, 1, 1)
    parts = [f"# {day.isoformat()}\n"]
    count = 1
    number = 0
    while count < lines:
        number += 1
        section = _section(rng, day, number)
        parts.append(section)
        count += section.count("\n") + 1
    return "\n".join(parts)


async def index_once(
    app: MemdeckApp,
    pilot: Pilot[Any],
    server: ServerProcess,
    workspace: Path,
    lines: int,
    gap: float | None,
    tokens: int,
) -> StallMeter:
    """Write a ``lines``-line daily log while the app runs (its watcher indexes it); measure the
    worst stall until it is embedded and the panels have refreshed; optionally while an answer
    streams ``gap`` seconds a piece. Removes the file afterwards; returns the stall meter."""
    main = app.main_screen
    panels = main.memory_panels
    rel = "memory/2030-01-01.md"
    path = workspace / rel
    text = big_log(lines, seed=lines + int(time.time()))  # new text: no cached vectors
    marks: dict[str, float] = {}
    seen_events = len(panels.stats_panel.events)

    def events() -> list[str]:
        return list(panels.stats_panel.events)[seen_events:]

    def indexed() -> bool:
        for line in events():
            if rel in line and "changed on disk" in line:
                marks.setdefault("text", time.perf_counter())
                if "embedded" in line:
                    marks.setdefault("embedded", time.perf_counter())
        tree = panels.daily_tree
        if any(log.path == rel for log in tree.logs) and "embedded" in marks:
            marks.setdefault("tree", time.perf_counter())
        return "tree" in marks and not main.header.progress

    def write() -> None:
        marks["write"] = time.perf_counter()
        path.write_text(text, encoding="utf-8")

    label = f"{text.count(chr(10)):,}-line daily log written into memory/ (the watcher indexes it)"
    if gap is None:
        meter = StallMeter().start()
        write()
        await _wait(indexed, 600)
        await pilot.pause()
        await meter.stop()
        print(f"Indexing a {label}, the UI idle")
        print(stall_line("while indexing", meter))
    else:
        meter = await stream_once(
            app,
            pilot,
            server,
            tokens,
            gap,
            on_first_token=write,
            until=indexed,
            label=f", while a {label}",
        )
    print(
        f"  write → searchable {(marks['text'] - marks['write']) * 1000:.0f} ms, → embedded "
        f"{(marks['embedded'] - marks['write']) * 1000:.0f} ms, → in the Daily tree "
        f"{(marks['tree'] - marks['write']) * 1000:.0f} ms"
    )
    seen_events = len(panels.stats_panel.events)
    path.unlink()

    def dropped() -> bool:
        return any(rel in line for line in events()) and not any(
            log.path == rel for log in panels.daily_tree.logs
        )

    await _wait(dropped, 120)
    return meter


#: One row of the issue's stall table: what ran, and its stall meter.
StallRow = tuple[str, StallMeter]


async def bench_in_app(
    workspace: Path,
    keys: int,
    tokens: int,
    stream_gaps: Sequence[float],
    *,
    parts: set[str],
    index_lines: int,
    rows: list[StallRow],
) -> None:
    """The in-process parts; each stall measured is appended to ``rows``."""
    from tui.app.app import MemdeckApp
    from tui.chat.chat import ChatEngine

    shutil.rmtree(workspace / "sessions", ignore_errors=True)  # start without old answers
    (workspace / "memory" / "2030-01-01.md").unlink(missing_ok=True)  # an interrupted run's
    server = ServerProcess()
    try:
        config = load_config(
            CACHE / "no-config.toml",
            env={"OPENAI_BASE_URL": server.base_url, "MEMDECK_MODEL": "fake-model"},
            overrides={"max_retries": 0},
        )
        # as the app opens it (tui/app/main.py): the local model in its helper process
        engine = ChatEngine.open(config, workspace=workspace, resident=True)
        app = MemdeckApp(engine, config_file=CACHE / "no-config.toml", watch="index" in parts)
        async with app.run_test(size=SIZE) as pilot:
            main = app.main_screen
            began = time.perf_counter()
            await _wait(lambda: main.header.model_state == "loaded", 120)
            await _wait(lambda: main.header.chunks is not None and not main.header.progress, 600)
            print(
                f"\nIn-process app on {main.header.chunks:,} chunks: model loaded and index "
                f"synced {time.perf_counter() - began:.1f} s after mount"
            )
            panel = main.memory_panels.injection_panel
            await _wait(lambda: panel.injection is not None)
            if "first" in parts:
                await first_answer(app, server)
            # The openai SDK is imported in a thread at start-up (about a second, holding the
            # GIL and the import lock): a start-up cost, not one of streaming.
            await _wait(
                lambda: not any(w.group == "llm-sdk" and w.is_running for w in main.workers), 60
            )
            # Once ready, the app collects and freezes its start-up objects (one full GC, about
            # 40 ms, within a second): a start-up cost too, not one of the first answer.
            await _wait(lambda: app.gc_pacer.active, 30)
            if "preview" in parts:
                await bench_preview(app, pilot, engine, panel, keys)
            if "stream" in parts:
                for number, gap in enumerate(stream_gaps):
                    what = f"{tokens:,} tokens at" if number == 0 else "at"
                    meter = await stream_once(app, pilot, server, tokens, gap)
                    rows.append((f"streaming {what} {1 / gap:.0f} tok/s", meter))
            if "index" in parts:
                watcher = main.watcher
                assert watcher is not None
                await _wait(watcher.ready.is_set, 60)
                idle = await index_once(app, pilot, server, workspace, index_lines, None, tokens)
                rows.append((f"indexing a {index_lines:,}-line log, UI idle", idle))
                both = await index_once(
                    app, pilot, server, workspace, index_lines, stream_gaps[0], tokens
                )
                rows.append((f"both at once ({1 / stream_gaps[0]:.0f} tok/s)", both))
            await pilot.press("ctrl+q")
        engine.close()
    finally:
        server.stop()


async def type_message(app: MemdeckApp, text: str) -> None:
    """Type ``text`` into the message box at a human pace, as the terminal driver posts keys
    (its first key starts the app's warm-up of the chat client, as it does for a user)."""
    from textual import events

    chat = app.main_screen.chat_pane
    chat.chat_input.focus()
    for char in text:
        await asyncio.sleep(HUMAN_KEY_GAP_S)
        app.post_message(events.Key("space" if char == " " else char, char))
    await _wait(lambda: chat.chat_input.value == text)


async def first_answer(app: MemdeckApp, server: ServerProcess) -> None:
    """The fresh app's first answer: typed at a human pace, Enter, then send → first token."""
    from textual import events

    from tui.app.widgets.chat_message import ChatMessage

    chat = app.main_screen.chat_pane
    server.enqueue({"text": ["The first ", "answer."], "chunk_delay": 0.01})
    text = "hello there"
    await type_message(app, text)
    received, original = _time_appends()
    finished = chat.turns_finished
    t_send = time.perf_counter()
    app.post_message(events.Key("enter", "\r"))
    await _wait(lambda: received, 60)
    ChatMessage.append_text = original  # type: ignore[method-assign]
    ms = (received[0] - t_send) * 1000
    print(
        f"First answer of the fresh app ({text!r} typed, a key every "
        f"{HUMAN_KEY_GAP_S * 1000:.0f} ms, then Enter)"
    )
    print(
        f"  send → first token received    {ms:7.0f} ms  target ≤ {TARGET_FIRST_ANSWER_MS:.0f} ms"
        f"  {verdict(ms <= TARGET_FIRST_ANSWER_MS)}"
    )
    await _wait(lambda: chat.turns_finished > finished, 60)


async def bench_preview(
    app: MemdeckApp, pilot: Pilot[Any], engine: ChatEngine, panel: InjectionPanel, keys: int
) -> None:
    """Keystroke → injection preview, at a human pace and in a burst."""
    from textual import events

    box = app.main_screen.chat_pane.chat_input
    box.focus()
    # Remember the injection built for each draft: the preview is "updated" when the
    # panel shows exactly that object.
    built: dict[str, Injection] = {}
    inject = engine.memory.inject

    def recording_inject(query: str, **kwargs: Any) -> Injection:
        injection = inject(query, **kwargs)
        built[query] = injection
        return injection

    engine.memory.inject = recording_inject  # type: ignore[method-assign]

    def showing(draft: str) -> bool:
        return panel.injection is not None and panel.injection is built.get(draft)

    # the engine's share alone
    engine_ms = []
    for end in range(1, len(SENTENCE) + 1):
        t0 = time.perf_counter()
        engine.preview_injection(SENTENCE[:end])
        engine_ms.append((time.perf_counter() - t0) * 1000)

    async def type_key(char: str) -> str:
        """Deliver a key as the terminal driver does (a Key event to the app); return
        the draft once the message box has it."""
        expected = box.value + char
        app.post_message(events.Key("space" if char == " " else char, char))
        await _wait(lambda: box.value == expected)
        return expected

    for char in "warm up":  # the first searches pay for cold caches; not counted
        await asyncio.sleep(HUMAN_KEY_GAP_S)
        draft = await type_key(char)
        await _wait(lambda draft=draft: showing(draft))
    await pilot.press("ctrl+u")
    await _wait(lambda: showing(""))

    # human pace: each key after the debounce, measured to its own preview
    latencies = []
    text = (SENTENCE + " ") * (keys // len(SENTENCE) + 1)
    for char in text[:keys]:
        await asyncio.sleep(HUMAN_KEY_GAP_S)
        built.clear()
        t0 = time.perf_counter()
        draft = await type_key(char)
        await _wait(lambda draft=draft: showing(draft))
        latencies.append((time.perf_counter() - t0) * 1000)
    print(
        f"Keystroke → injection preview, {len(latencies)} keys, "
        f"a key every {HUMAN_KEY_GAP_S * 1000:.0f} ms"
    )
    print(
        f"  app   p50 {pct(latencies, 50):6.1f} ms  p95 {pct(latencies, 95):6.1f} ms  "
        f"max {max(latencies):6.1f} ms  target p95 ≤ {TARGET_PREVIEW_P95_MS:.0f} ms  "
        f"{verdict(pct(latencies, 95) <= TARGET_PREVIEW_P95_MS)}"
    )
    print(
        f"  engine.preview_injection alone  p50 {pct(engine_ms, 50):6.1f} ms  "
        f"p95 {pct(engine_ms, 95):6.1f} ms"
    )

    # a burst: time from its last key to the preview of the whole draft
    await pilot.press("ctrl+u")
    await _wait(lambda: showing(""))
    await asyncio.sleep(0.5)
    burst = SENTENCE[:30]
    for char in burst:
        await asyncio.sleep(BURST_KEY_GAP_S)
        t0 = time.perf_counter()
        await type_key(char)
    await _wait(lambda: showing(burst))
    print(
        f"  burst of {len(burst)} keys {BURST_KEY_GAP_S * 1000:.0f} ms apart: last key → "
        f"preview of the whole draft {(time.perf_counter() - t0) * 1000:.0f} ms "
        "(the panel's trailing debounce included)"
    )
    engine.memory.inject = inject  # type: ignore[method-assign]
    await pilot.press("ctrl+u")


def main(argv: list[str] | None = None) -> int:
    from tui.engine.heap import tune_process

    tune_process()  # as the `memdeck` entry point does: the app measured is the one shipped
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--chunks",
        type=int,
        default=10_000,
        help="workspace size in indexed units (entries), about 67 per generated daily log",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="full runs, one after the other, each with its figures and its stall table",
    )
    parser.add_argument("--frame-runs", type=int, default=5, help="first-frame runs in a run")
    parser.add_argument("--keys", type=int, default=50, help="keystrokes timed")
    parser.add_argument("--tokens", type=int, default=2_000, help="streamed answer length")
    parser.add_argument(
        "--rates",
        default="200,50",
        help="streaming speeds to try, tokens/s, comma-separated (default 200,50)",
    )
    parser.add_argument(
        "--index-lines", type=int, default=3_000, help="lines of the daily log indexed live"
    )
    parser.add_argument(
        "--parts",
        default="frame,first,preview,stream,index",
        help="what to measure, comma-separated: frame, first, preview, stream, index (default all)",
    )
    parser.add_argument("--rebuild", action="store_true", help="regenerate the workspace")
    parser.add_argument(
        "--stacks",
        action="store_true",
        help="print where the event loop was during the stalls over the target (a diagnosis)",
    )
    args = parser.parse_args(argv)
    global STACKS
    STACKS = args.stacks
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"memdeck TUI bench · {load()}")
    workspace = build_workspace(args.chunks, args.rebuild)
    gaps = [1 / float(rate) for rate in args.rates.split(",") if rate.strip()]
    runs: list[tuple[str, list[StallRow]]] = []
    for run in range(1, args.runs + 1):
        if args.runs > 1:
            print(f"\n=== run {run} of {args.runs} · {load()}")
        began = os.getloadavg()[0]
        if "frame" in parts:
            with FakeOpenAI() as server:
                bench_first_frame(workspace, args.frame_runs, server)
        rows: list[StallRow] = []
        if parts & {"first", "preview", "stream", "index"}:
            asyncio.run(
                bench_in_app(
                    workspace,
                    args.keys,
                    args.tokens,
                    gaps,
                    parts=parts,
                    index_lines=args.index_lines,
                    rows=rows,
                )
            )
        loads = f"load {began:.2f}-{os.getloadavg()[0]:.2f}"
        runs.append((loads, rows))
        print(f"\n{load()}")
        if rows:
            print(stall_table([(f"run {run} ({loads})", rows)]))
    if len(runs) > 1 and runs[0][1]:
        print(f"\nAll {len(runs)} runs (1-minute load average at each run's start and end)")
        columns = [(f"run {n} ({loads})", rows) for n, (loads, rows) in enumerate(runs, 1)]
        print(stall_table(columns))
    return 0


def stall_table(runs: list[tuple[str, list[StallRow]]]) -> str:
    """The issue's table of worst stalls: a row per part measured, a column per run."""
    target = f"≤ {TARGET_STALL_MS:.0f}, 0 ticks over {TARGET_STALL_MS:.0f}"
    lines = [
        "| worst event-loop stall | " + " | ".join(title for title, _ in runs) + " | target |",
        "|---" * (len(runs) + 2) + "|",
    ]
    for index, (what, _) in enumerate(runs[0][1]):
        cells = []
        for _, rows in runs:
            meter = rows[index][1]
            over, worked = meter.over(TARGET_STALL_MS), meter.worked_over(TARGET_STALL_MS)
            mark = "✓" if meter.worst_ms <= TARGET_STALL_MS and not over else "✗"
            cells.append(
                f"{meter.worst_ms:.0f} ms ({over} ticks over {TARGET_STALL_MS:.0f}, "
                f"{worked} of them working) {mark}"
            )
        lines.append(f"| {what} | " + " | ".join(cells) + f" | {target} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
