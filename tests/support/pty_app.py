"""The ``memdeck`` app in a real pseudo-terminal: keys in, what it showed out."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from support.chat_support import ROOT

_ANSI = re.compile(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[PX^_].*?\x1b\\|\x1b.")


def drive_in_a_pty(
    root: Path, env: dict[str, str], keys: list[tuple[bytes, bytes | None]], typed: bytes
) -> bytes:
    """Start ``memdeck`` in a pseudo-terminal, send ``keys`` once the screen is up (each one
    then waiting for its marker on screen, if it has one), wait for ``typed`` to show, then
    SIGTERM it; return what it showed, its last words included (without escapes)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "tui", "--workspace", str(root)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def read_until(marker: bytes, timeout: float) -> bool:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return False
                if not data:
                    return False
                seen += data
                if marker in _ANSI.sub(b"", seen):
                    return True
        return False

    try:
        assert read_until(b"Inject", 60), _ANSI.sub(b"", seen)[-2000:]
        time.sleep(1.0)
        for key, marker in keys:
            os.write(master, key)
            # A key with a marker is sent again if its effect does not show: under a loaded CI
            # machine F5's focus once never reached the editor (its ^s save never showed).
            for _ in range(2):
                if marker is None or read_until(marker, 15):
                    break
                os.write(master, key)
            else:
                assert read_until(marker, 15), _ANSI.sub(b"", seen)[-2000:]
            time.sleep(0.5)
        assert read_until(typed, 30), _ANSI.sub(b"", seen)[-2000:]
        # The header's "● MEMORY.md unsaved" is checked in-process (a terminal under load may
        # get that line in pieces); here the recovery copy proves the buffer was dirty.
        read_until(b"unsaved", 5)
        process.send_signal(signal.SIGTERM)
        read_until(b"\x00never", 10)
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        with contextlib.suppress(OSError):
            os.close(master)
    return _ANSI.sub(b"", seen)
