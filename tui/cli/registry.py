"""What a ``memdeck`` subcommand is, and the error every command reports in one line. The
command modules import this; it imports none of them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple


class CliError(Exception):
    """An error worth one clear line and a non-zero exit."""


class Command(NamedTuple):
    """A subcommand: its one-line help, how to add its arguments, and what it runs (an exit
    status)."""

    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
