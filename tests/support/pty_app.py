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

#: A terminal escape sequence (CSI, OSC, DCS/SOS/PM/APC, or any other ESC pair).
ANSI = re.compile(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[PX^_].*?\x1b\\|\x1b.")


def strip_escapes(data: bytes) -> bytes:
    """``data`` without its terminal escape sequences: the text a screen showed."""
    return ANSI.sub(b"", data)


class PtyApp:
    """``python -m tui --workspace ROOT`` in a pseudo-terminal of ``size`` (columns, rows), for
    a ``with`` block: at its end a process still running is killed and the terminal closed.

    ``raw`` is every byte the terminal got so far, ``text`` the same without escapes."""

    def __init__(self, root: Path, env: dict[str, str], size: tuple[int, int] = (140, 40)) -> None:
        columns, rows = size
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tui", "--workspace", str(root)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        os.close(slave)
        self.raw = b""

    def __enter__(self) -> PtyApp:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            os.close(self.master)

    @property
    def text(self) -> bytes:
        return strip_escapes(self.raw)

    def read_until(self, marker: bytes, timeout: float) -> bool:
        """Read what the app writes until ``marker`` is in :attr:`text`; False after
        ``timeout`` seconds or once the terminal is closed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([self.master], [], [], 0.05)[0]:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    return False
                if not data:
                    return False
                self.raw += data
                if marker in self.text:
                    return True
        return False

    def expect(self, marker: bytes, timeout: float, shown: int = 2000) -> None:
        """:meth:`read_until` ``marker``, or fail with the last ``shown`` bytes of the screen."""
        assert self.read_until(marker, timeout), self.text[-shown:]

    def send(self, data: bytes) -> None:
        """Type ``data`` (keys, as a terminal sends them)."""
        os.write(self.master, data)


def drive_in_a_pty(
    root: Path, env: dict[str, str], keys: list[tuple[bytes, bytes | None]], typed: bytes
) -> bytes:
    """Start ``memdeck`` in a pseudo-terminal, send ``keys`` once the screen is up (each one
    then waiting for its marker on screen, if it has one), wait for ``typed`` to show, then
    SIGTERM it; return what it showed, its last words included (without escapes)."""
    with PtyApp(root, env) as app:
        app.expect(b"Inject", 60)
        time.sleep(1.0)
        for key, marker in keys:
            app.send(key)
            # A key with a marker is sent again if its effect does not show: under a loaded CI
            # machine F5's focus once never reached the editor (its ^s save never showed).
            if marker is not None:
                for _ in range(2):
                    if app.read_until(marker, 15):
                        break
                    app.send(key)
                else:
                    app.expect(marker, 15)
            time.sleep(0.5)
        app.expect(typed, 30)
        # The header's "● MEMORY.md unsaved" is checked in-process (a terminal under load may
        # get that line in pieces); here the recovery copy proves the buffer was dirty.
        app.read_until(b"unsaved", 5)
        app.process.send_signal(signal.SIGTERM)
        app.read_until(b"\x00never", 10)
        app.process.wait(timeout=20)
    return app.text
