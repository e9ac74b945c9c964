"""The cost of the memory's git history (issue 31): a commit per write in a workspace of two
years of daily logs (730 files) whose MEMORY.md has 5,000 commits of history. Target: p95 of
a write's commit <= 30 ms.

    .venv/bin/python tests/bench/history.py [--writes 200] [--commits 5000] [--days 730]

A script, not a test: it prints its figures (median and p95 in ms) and asserts nothing. In
one run, on the same history:

- ``save_entry`` with history on against an identical workspace with ``mode="off"`` (writes
  interleaved): the difference is what the commit adds to a real write, re-indexing included;
- the commit inside those real writes alone (the store's ``on_written`` hook, timed);
- ``GitHistory.commit`` alone after a small edit of MEMORY.md;
- the ``git`` command instead (``git add`` + ``git commit`` as processes), for the choice of
  pygit2 (docs/history.md);
- reading: ``changes(limit=200)`` and ``origin()`` (blame) of MEMORY.md, first call and cached.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import pygit2

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tui.engine.engine import MemoryEngine  # noqa: E402
from tui.engine.git_history import AUTHOR_EMAIL, AUTHOR_NAME, GITIGNORE  # noqa: E402
from tui.engine.history_records import Attribution  # noqa: E402
from tui.engine.workspace import Workspace  # noqa: E402

TOPICS = ["garden", "bikes", "Rust", "Lisbon", "the dentist", "tea", "the cello", "bees"]
#: Lines of MEMORY.md the history keeps rewriting (it grows past this by appends).
MEMORY_LINES = 300
TARGET_P95_MS = 30.0
SLOW_ORIGIN_MS = 200.0


def entry(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return f"- Fact {i}: the user mentioned {topic} in week {i % 52} <!-- mem id=b{i:06x} -->\n"


def build_workspace(root: Path, days: int, commits: int) -> None:
    """Daily logs of ``days`` days and a MEMORY.md, committed, then ``commits`` commits that
    each append to or rewrite a line of MEMORY.md (one in ten also touches a daily log),
    written with pygit2's object API (seconds, not minutes)."""
    (root / "memory").mkdir(parents=True)
    first = date(2025, 1, 1)
    logs = [f"memory/{(first + timedelta(days=d)).isoformat()}.md" for d in range(days)]
    repo = pygit2.init_repository(str(root))
    (root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    files: dict[str, bytes] = {
        rel: f"# {rel[7:17]}\n\n- worked on {TOPICS[n % 8]} for a while\n".encode()
        for n, rel in enumerate(logs)
    }
    lines = ["# Long-term Memory\n", "\n"] + [entry(i) for i in range(MEMORY_LINES)]
    files["MEMORY.md"] = "".join(lines).encode()
    stamp = int(time.time()) - commits * 60
    parent: list[pygit2.Oid] = []
    for n in range(commits + 1):
        if n:
            if n % 10 == 5:
                lines.append(entry(MEMORY_LINES + n))
            else:
                lines[2 + n % MEMORY_LINES] = entry(n * 7)
            files["MEMORY.md"] = "".join(lines).encode()
            if n % 10 == 0:
                log = logs[n % days]
                files[log] += f"- note {n}\n".encode()
        changed = files if n == 0 else {"MEMORY.md": files["MEMORY.md"]}
        if n and n % 10 == 0:
            changed[logs[n % days]] = files[logs[n % days]]
        tree = _tree(repo, files, changed, parent)
        who = pygit2.Signature(AUTHOR_NAME, AUTHOR_EMAIL, stamp + n * 60, 0)
        source = ("chat", "flush", "editor", "mcp")[n % 4]
        message = f"change {n}\n\nMemdeck-Source: {source}\n"
        parent = [repo.create_commit(None, who, who, message, tree, parent)]
    repo.references.create("refs/heads/master", parent[0], force=True)
    repo.set_head("refs/heads/master")
    repo.index.read_tree(repo.get(parent[0]).peel(pygit2.Tree))  # type: ignore[union-attr]
    repo.index.write()
    for rel, data in files.items():
        (root / rel).write_bytes(data)


def _tree(
    repo: pygit2.Repository,
    files: dict[str, bytes],
    changed: dict[str, bytes],
    parent: list[pygit2.Oid],
) -> pygit2.Oid:
    """The root tree with ``changed`` written over the parent's (all of ``files`` at first)."""
    blob = pygit2.enums.FileMode.BLOB
    tree = pygit2.enums.FileMode.TREE
    if not parent:
        memory = repo.TreeBuilder()
        for rel, data in files.items():
            if rel.startswith("memory/"):
                memory.insert(rel[7:], repo.create_blob(data), blob)
        top = repo.TreeBuilder()
        top.insert("memory", memory.write(), tree)
        top.insert("MEMORY.md", repo.create_blob(files["MEMORY.md"]), blob)
        return top.write()
    before = repo.get(parent[0]).peel(pygit2.Tree)  # type: ignore[union-attr]
    top = repo.TreeBuilder(before)
    logs = [rel for rel in changed if rel.startswith("memory/")]
    if logs:
        memory = repo.TreeBuilder(before["memory"].peel(pygit2.Tree))
        for rel in logs:
            memory.insert(rel[7:], repo.create_blob(changed[rel]), blob)
        top.insert("memory", memory.write(), tree)
    top.insert("MEMORY.md", repo.create_blob(changed["MEMORY.md"]), blob)
    return top.write()


def ms(times: list[float]) -> str:
    median = statistics.median(times) * 1000
    p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)] * 1000
    return f"median {median:7.1f} ms   p95 {p95:7.1f} ms   (n={len(times)})"


def p95(times: list[float]) -> float:
    return sorted(times)[max(0, int(len(times) * 0.95) - 1)] * 1000


def timed(call: Callable[[], object]) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def git_env() -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": AUTHOR_NAME,
        "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
        "GIT_COMMITTER_NAME": AUTHOR_NAME,
        "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200, help="writes per measure")
    parser.add_argument("--commits", type=int, default=5000, help="commits of history")
    parser.add_argument("--days", type=int, default=730, help="daily logs")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        on_root, off_root = Path(tmp) / "on", Path(tmp) / "off"
        began = time.perf_counter()
        build_workspace(on_root, args.days, args.commits)
        shutil.copytree(on_root, off_root, symlinks=True)
        print(
            f"workspace: {args.days} daily logs, MEMORY.md with {args.commits} commits of "
            f"history (built in {time.perf_counter() - began:.1f} s)"
        )
        on = MemoryEngine(Workspace.open(on_root), history="on")
        off = MemoryEngine(Workspace.open(off_root), history="off")
        try:
            for engine in (on, off):
                engine.sync(embed=False)
            writes(on, off, args.writes)
            commit_alone(on, args.writes)
            git_command(on_root, args.writes)
            reading(on)
        finally:
            on.close()
            off.close()
    print(f"load average {os.getloadavg()[0]:.2f}")


def writes(on: MemoryEngine, off: MemoryEngine, count: int) -> None:
    """``save_entry`` with history on and off, interleaved; the commit's own time in them."""
    hook = on.store.on_written
    assert hook is not None
    in_writes: list[float] = []

    def timed_hook(rel: str) -> None:
        in_writes.append(timed(lambda: hook(rel)))

    on.store.on_written = timed_hook
    with_history: list[float] = []
    without: list[float] = []
    for i in range(count):
        text = f"Bench fact {i} about {TOPICS[i % 8]}"
        for engine, times in ((on, with_history), (off, without)):
            began = time.perf_counter()
            engine.save_entry(text, confidence="high", source="user")
            times.append(time.perf_counter() - began)
    on.store.on_written = hook
    added = statistics.median(with_history) - statistics.median(without)
    print("\nsave_entry (a real write: the file, re-indexing, and with history its commit)")
    print(f"  history on            {ms(with_history)}")
    print(f"  history off           {ms(without)}")
    print(
        f"  difference            median {added * 1000:7.1f} ms   "
        f"p95 {p95(with_history) - p95(without):7.1f} ms"
    )
    verdict = "meets" if p95(in_writes) <= TARGET_P95_MS else "MISSES"
    print(
        f"  the commit in them    {ms(in_writes)}   {verdict} the target "
        f"(p95 <= {TARGET_P95_MS:.0f} ms)"
    )


def commit_alone(engine: MemoryEngine, count: int) -> None:
    """``GitHistory.commit`` after a one-line edit of MEMORY.md."""
    path = engine.workspace.root / "MEMORY.md"
    who = Attribution("cli", summary="bench")
    times = []
    for i in range(count):
        with path.open("a", encoding="utf-8") as file:
            file.write(f"- appended {i}\n")
        times.append(timed(lambda: engine.history.commit(["MEMORY.md"], who)))
    print(f"\nGitHistory.commit alone   {ms(times)}")


def git_command(root: Path, count: int) -> None:
    """The same commit with the ``git`` command: ``git add`` then ``git commit``."""
    if shutil.which("git") is None:
        print("\ngit command: not installed")
        return
    env = git_env()
    path = root / "MEMORY.md"
    times = []
    for i in range(count):
        with path.open("a", encoding="utf-8") as file:
            file.write(f"- by git {i}\n")

        def commit() -> None:
            subprocess.run(["git", "-C", str(root), "add", "MEMORY.md"], env=env, check=True)
            subprocess.run(
                ["git", "-C", str(root), "commit", "-q", "-m", "bench\n\nMemdeck-Source: cli"],
                env=env,
                check=True,
            )

        times.append(timed(commit))
    print(f"git add + git commit      {ms(times)}")


def reading(engine: MemoryEngine) -> None:
    """``changes(limit=200)`` and ``origin()`` of MEMORY.md (blame over its whole history)."""
    history = engine.history
    first = timed(lambda: history.changes(limit=200))
    again = [timed(lambda: history.changes(limit=200)) for _ in range(20)]
    print(f"\nchanges(limit=200)        first {first * 1000:.1f} ms, then {ms(again)}")
    lines = (engine.workspace.root / "MEMORY.md").read_text(encoding="utf-8").count("\n")
    cold = timed(lambda: history.origin("MEMORY.md", 150, 150))
    warm = []
    for n in range(50):
        began = time.perf_counter()
        history.origin("MEMORY.md", 2 + n % 280, 2 + n % 280)
        warm.append(time.perf_counter() - began)
    found = history.origin("MEMORY.md", 150, 150)
    print(
        f"origin() of MEMORY.md ({lines} lines): first {cold * 1000:.0f} ms (blame), "
        f"then cached {ms(warm)}"
    )
    if found is None:
        print("  origin() found nothing: the file on disk differs from HEAD")
    repo = pygit2.Repository(str(engine.workspace.root))
    lines_only = timed(lambda: repo.blame("MEMORY.md", min_line=150, max_line=150))
    print(f"  for comparison, libgit2's blame of line 150 alone: {lines_only * 1000:.0f} ms")
    after_save = []
    for n in range(20):
        with engine.attributed(Attribution("chat", session="bench", summary=f"save {n}")):
            engine.save_entry(f"Bench fact after the blame {n}", confidence="high", source="user")
        after_save.append(timed(lambda: history.origin("MEMORY.md", 150, 150)))
    print(
        f"origin() after each of 20 saves (the kept line origins follow the commit, no new "
        f"blame): {ms(after_save)}"
    )
    if cold * 1000 > SLOW_ORIGIN_MS:
        print(
            f"  SLOW: the very first origin() of MEMORY.md takes over {SLOW_ORIGIN_MS:.0f} ms "
            "(libgit2's blame walks the file's history); it runs in a worker, once per "
            "workspace: memdeck's commits then keep the lines' origins (.memdeck/origins.json)"
        )


if __name__ == "__main__":
    main()
