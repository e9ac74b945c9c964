"""The index shared by processes (the app and ``memdeck mcp``, or a command): opening one more
connection in a process must not drop the SQLite locks its open connections hold, or another
process's last close deletes the WAL and shared memory under them (the app then failed a turn
with "disk I/O error" after an agent saved over MCP)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.chat_support import ROOT

from tui.engine.index_db import connect

OTHER_PROCESS = """
import sys
from tui.engine.index_db import connect
conn = connect(sys.argv[1])
conn.execute("INSERT INTO notes VALUES ('from the other process')")
conn.close()
"""


def test_a_second_connection_keeps_the_first_one_s_wal_from_another_process_s_close(
    tmp_path: Path,
) -> None:
    db = tmp_path / "index.db"
    first = connect(db)
    first.execute("CREATE TABLE notes (text TEXT)")
    first.execute("INSERT INTO notes VALUES ('first')")
    second = connect(db)  # another thread's connection, as the app opens them
    subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, str(db)], cwd=ROOT, check=True, timeout=60
    )
    # This process still had the database open: its WAL and shared memory stay.
    assert (tmp_path / "index.db-wal").exists() and (tmp_path / "index.db-shm").exists()
    first.execute("INSERT INTO notes VALUES ('after')")
    rows = {text for (text,) in second.execute("SELECT text FROM notes")}
    assert rows == {"first", "from the other process", "after"}
    first.close()
    second.close()
    reopened = connect(db)
    assert reopened.execute("SELECT count(*) FROM notes").fetchone() == (3,)
    reopened.close()
