"""The user's workspace on disk: where memory files live, which ones count, and the path guard."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import platformdirs

MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"
STATE_DIR = ".memdeck"
SESSIONS_DIR = "sessions"
#: Written in ``.memdeck/`` (and ``sessions/``) when memdeck makes the folder: a ``git add .``
#: in a workspace that is a git repository (OpenClaw's is) leaves memdeck's own files out.
OWN_GITIGNORE = "# memdeck's own files: never versioned\n*\n"
#: Files in a workspace's root that make it an OpenClaw agent workspace.
OPENCLAW_MARKS = ("AGENTS.md", "SOUL.md")
#: The root file OpenClaw keeps the user's profile in, and indexes as memory.
OPENCLAW_USER_FILE = "USER.md"

_DATE_IN_NAME = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


class WorkspaceError(Exception):
    """A problem with the workspace the user pointed at, worded for the user."""


class PathRefusedError(WorkspaceError):
    """A path outside the memory files was asked for (``..``, absolute, symlink leading out)."""


class LinkRefusedError(PathRefusedError, OSError):
    """A symlink where memdeck keeps its own files (``.memdeck/``, ``sessions/``): never
    followed (an OSError too, so every write that copes with a failing disk copes with it)."""


#: memdeck's own folders in a workspace: nothing in them is a link memdeck follows.
OWN_FOLDERS = (STATE_DIR, SESSIONS_DIR)


def refuse_own_links(path: Path | str) -> None:
    """Raise :class:`LinkRefusedError` when ``path``, or a folder between it and the
    workspace's ``.memdeck``/``sessions`` folder (that folder included), is a symlink.

    A path outside those folders (a memory file) is not checked here: the path guard
    (:meth:`Workspace.resolve_memory_path`) decides where memory links may lead. Openers pair
    this with ``O_NOFOLLOW``, which also covers a link made between the check and the open.
    """
    path = Path(path)
    parts = path.parts
    own = [i for i, part in enumerate(parts) if part in OWN_FOLDERS]
    if not own:
        return
    for end in range(own[-1] + 1, len(parts) + 1):
        step = Path(*parts[:end])
        if step.is_symlink():
            raise LinkRefusedError(
                f"{step} is a symbolic link; memdeck never follows links in its own folders "
                f"({', '.join(f + '/' for f in OWN_FOLDERS)}): remove it"
            )


def make_own_folder(path: Path) -> None:
    """Create memdeck's folder ``path`` (private) if missing, and give it a ``.gitignore``
    holding ``*`` if it has none, so that nothing in it is ever committed."""
    refuse_own_links(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    refuse_own_links(ignore)
    if ignore.exists():
        return
    try:
        fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another memdeck process wrote it just now
        return
    except PermissionError:  # a folder the user made read-only stays as it is
        return
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(OWN_GITIGNORE)


def check_extra_file(rel_path: str) -> str:
    """``rel_path`` as an extra memory file (see :attr:`Workspace.extra_files`), cleaned;
    ValueError with one line saying why it cannot be one."""
    cleaned = rel_path.strip().replace("\\", "/")
    parts = [part for part in cleaned.split("/") if part not in ("", ".")]
    if cleaned.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", cleaned):
        raise ValueError(f"{rel_path!r}: give a path relative to the workspace folder")
    if ".." in parts:
        raise ValueError(f"{rel_path!r}: '..' is not allowed")
    rel = "/".join(parts)
    if not rel.lower().endswith(".md"):
        raise ValueError(f"{rel_path!r}: only Markdown files (.md) can be memory")
    if any(part.startswith(".") for part in parts) or parts[0] in OWN_FOLDERS:
        raise ValueError(f"{rel_path!r}: hidden files and memdeck's own folders are not memory")
    return rel


def default_workspace() -> Path:
    """``MEMDECK_WORKSPACE`` if set, else the platform data dir."""
    env = os.environ.get("MEMDECK_WORKSPACE")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("memdeck"))


def date_for_path(rel_path: str) -> date | None:
    """The date a daily-log path is about (``memory/2026/2026-11-03-trip.md``), else None.

    ``MEMORY.md`` is evergreen and has no date.
    """
    if not rel_path.startswith(MEMORY_DIR + "/"):
        return None
    match = _DATE_IN_NAME.search(Path(rel_path).name)
    if not match:
        return None
    try:
        return date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


@dataclass(frozen=True)
class Workspace:
    """A memdeck workspace rooted at ``root``; ``extra_files``: Markdown files besides
    ``MEMORY.md`` and ``memory/`` that are memory too (``[memory] extra_files``, e.g.
    OpenClaw's ``USER.md``), workspace-relative, checked by :func:`check_extra_file`."""

    root: Path
    extra_files: tuple[str, ...] = ()

    @classmethod
    def open(
        cls,
        root: Path | str | None = None,
        *,
        create: bool = True,
        extra_files: tuple[str, ...] = (),
    ) -> Workspace:
        """Open (and by default create) the workspace at ``root`` or the default location."""
        path = Path(root).expanduser() if root is not None else default_workspace()
        if path.exists() and not path.is_dir():
            raise WorkspaceError(f"workspace {path} exists but is not a folder")
        if not path.exists():
            if not create:
                raise WorkspaceError(f"workspace {path} does not exist")
            path.mkdir(mode=0o700, parents=True)
        extras = tuple(dict.fromkeys(check_extra_file(rel) for rel in extra_files))
        workspace = cls(path.resolve(), tuple(r for r in extras if r != MEMORY_FILE))
        for own in OWN_FOLDERS:
            refuse_own_links(workspace.root / own)
        make_own_folder(workspace.state_dir)
        return workspace

    @property
    def memory_file(self) -> Path:
        return self.root / MEMORY_FILE

    @property
    def memory_dir(self) -> Path:
        return self.root / MEMORY_DIR

    @property
    def sessions_dir(self) -> Path:
        return self.root / SESSIONS_DIR

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def index_path(self) -> Path:
        return self.state_dir / "index.db"

    @property
    def history_path(self) -> Path:
        return self.state_dir / "history.jsonl"

    def daily_log(self, day: date) -> Path:
        """Path of the daily log for ``day``."""
        return self.memory_dir / f"{day.isoformat()}.md"

    def relative(self, path: Path) -> str:
        """Workspace-relative POSIX path of ``path``."""
        return Path(os.path.relpath(path, self.root)).as_posix()

    def is_openclaw(self) -> bool:
        """Whether this is an OpenClaw agent workspace (its ``AGENTS.md`` or ``SOUL.md``)."""
        return any((self.root / name).is_file() for name in OPENCLAW_MARKS)

    def suggestions(self) -> list[str]:
        """What the user may want to configure for this workspace, a line each: an OpenClaw
        workspace's ``USER.md`` when it is not memory here yet."""
        user = OPENCLAW_USER_FILE
        if user in self.extra_files or not self.is_openclaw() or not (self.root / user).is_file():
            return []
        return [
            f"this is an OpenClaw workspace: to search its {user} as memory too, add "
            f'extra_files = ["{user}"] under [memory] in config.toml'
        ]

    def is_memory_path(self, rel_path: str) -> bool:
        """True for ``MEMORY.md``, the extra files and Markdown files under ``memory/`` (no
        hidden parts)."""
        parts = rel_path.split("/")
        if any(part.startswith(".") for part in parts):
            return False
        if rel_path == MEMORY_FILE or rel_path in self.extra_files:
            return True
        return parts[0] == MEMORY_DIR and len(parts) > 1 and rel_path.lower().endswith(".md")

    def resolve_memory_path(self, requested: str, *, follow: bool = False) -> Path:
        """The one path guard: map a user- or model-supplied path to a memory file.

        Accepts ``MEMORY.md`` and files under ``memory/``, written relative to the workspace.
        Refuses absolute paths, ``..`` segments, anything else, symlinks that lead out of the
        workspace (or into its ``.memdeck`` state or ``sessions``) and symlink loops, with
        :class:`PathRefusedError`. Returns the path as named, or with ``follow`` the real file
        it leads to (what a write must replace, so a link inside the workspace stays a link).
        """
        cleaned = requested.strip().replace("\\", "/")
        if not cleaned:
            raise PathRefusedError("empty path")
        if cleaned.startswith("/") or re.match(r"^[A-Za-z]:", cleaned) or cleaned.startswith("~"):
            raise PathRefusedError(
                f"{requested!r}: absolute paths are not allowed; use MEMORY.md or memory/..."
            )
        parts = [part for part in cleaned.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise PathRefusedError(f"{requested!r}: '..' is not allowed")
        rel = "/".join(parts)
        if not self.is_memory_path(rel):
            extra = "".join(f", {name}" for name in self.extra_files)
            raise PathRefusedError(
                f"{requested!r}: only MEMORY.md{extra} and Markdown files under memory/ can be read"
            )
        candidate = self.root / rel
        resolved = self._resolve_inside(rel)
        return resolved if follow else candidate

    def _resolve_inside(self, rel: str) -> Path:
        """The real path of ``rel``; refused if a symlink loops or leads out of the workspace
        (or into its ``.memdeck`` state or ``sessions``)."""
        try:
            resolved = (self.root / rel).resolve()
        except (RuntimeError, OSError) as exc:  # RuntimeError: Python < 3.13 on a symlink loop
            raise PathRefusedError(f"{rel}: symlink loop, not followed") from exc
        if not resolved.is_relative_to(self.root):
            raise PathRefusedError(f"{rel}: symlink leads outside the workspace, not followed")
        if any(resolved.is_relative_to(self.root / own) for own in OWN_FOLDERS):
            raise PathRefusedError(
                f"{rel}: symlink leads into memdeck's own files "
                f"({', '.join(own + '/' for own in OWN_FOLDERS)}), not followed"
            )
        return resolved

    def _check_folder_links(
        self, folder: Path, dirnames: list[str], filenames: list[str], warnings: list[str]
    ) -> None:
        """Warn about symlinked folders that loop or lead out (a looping one is listed with
        the files, as it is no folder)."""
        for name in dirnames + [f for f in filenames if not f.lower().endswith(".md")]:
            link = folder / name
            if link.is_symlink() and (name in dirnames or not link.exists()):
                try:
                    self._resolve_inside(self.relative(link))
                except PathRefusedError as exc:
                    warnings.append(f"{exc}; skipped")

    def iter_memory_files(self, warnings: list[str] | None = None) -> Iterator[tuple[str, Path]]:
        """Yield ``(relative path, path)`` of every memory file, sorted.

        Every file passes the path guard: symlinks leading out of the workspace and symlink
        loops are skipped with a warning. Symlinked folders are not walked into (with a
        warning when they loop or lead out).
        """
        candidates: list[Path] = []
        for root_file in (self.memory_file, *(self.root / rel for rel in self.extra_files)):
            if root_file.is_symlink() or root_file.exists():
                candidates.append(root_file)
        if self.memory_dir.is_dir():
            for dirpath, dirnames, filenames in os.walk(self.memory_dir, followlinks=False):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                if warnings is not None:
                    self._check_folder_links(Path(dirpath), dirnames, filenames, warnings)
                for name in sorted(filenames):
                    if name.lower().endswith(".md") and not name.startswith("."):
                        candidates.append(Path(dirpath) / name)
        for path in candidates:
            rel = self.relative(path)
            try:
                self.resolve_memory_path(rel)
            except PathRefusedError as exc:
                if warnings is not None:
                    warnings.append(f"{exc}; skipped")
                continue
            if not path.is_file():
                continue
            yield rel, path
