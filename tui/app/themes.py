"""memdeck's own Textual themes, read from TOML files in ``themes/``.

Two folders are searched, later ones overriding earlier ones by theme name:

1. ``themes/`` at the top of the checkout (next to ``tui/``), which is also where an editable
   install finds it;
2. ``themes/`` in the user's config folder (beside ``config.toml``), for themes of their own.

A theme file holds the fields of :class:`textual.theme.Theme` (``name``, ``primary``, ``dark``,
...) and an optional ``[variables]`` table. A broken file is skipped with a warning, never fatal.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from textual.theme import Theme

#: The theme used when the configured one does not exist.
DEFAULT_THEME = "memdeck-dark"

_THEME_FIELDS = {f.name for f in fields(Theme)}
_REQUIRED = ("name", "primary")


@dataclass
class LoadedThemes:
    """Themes found (in file order) and why any file was skipped."""

    themes: list[Theme] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def bundled_themes_dir() -> Path:
    """``tui/themes/`` in an installed wheel, else ``themes/`` beside the ``tui`` package (the
    checkout or editable install); setup.py maps the one to the other."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "themes"
    return installed if installed.is_dir() else package.parent / "themes"


def theme_dirs(config_file: Path | None = None) -> list[Path]:
    """Folders searched for theme files, lowest precedence first."""
    dirs = [bundled_themes_dir()]
    if config_file is not None:
        dirs.append(config_file.parent / "themes")
    return dirs


def parse_theme(path: Path) -> Theme:
    """A :class:`Theme` from one TOML file; ValueError naming the problem otherwise."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read {path.name}: {exc}") from exc
    unknown = sorted(set(data) - _THEME_FIELDS)
    if unknown:
        raise ValueError(f"{path.name}: unknown keys {', '.join(unknown)}")
    missing = [key for key in _REQUIRED if not isinstance(data.get(key), str)]
    if missing:
        raise ValueError(f"{path.name}: {', '.join(missing)} must be set")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(
        isinstance(value, str) for value in variables.values()
    ):
        raise ValueError(f"{path.name}: [variables] must map names to strings")
    try:
        theme = Theme(**data)
        theme.to_color_system()  # validates every colour now, not when the theme is applied
    except Exception as exc:  # Textual raises various errors for bad colours
        raise ValueError(f"{path.name}: {exc}") from exc
    return theme


def load_themes(dirs: list[Path] | None = None) -> LoadedThemes:
    """Every ``*.toml`` theme in ``dirs`` (default :func:`theme_dirs`); later dirs win by name."""
    found: dict[str, Theme] = {}
    loaded = LoadedThemes()
    for folder in dirs if dirs is not None else theme_dirs():
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = parse_theme(path)
            except ValueError as exc:
                loaded.warnings.append(f"theme skipped: {exc}")
                continue
            found[theme.name] = theme
    loaded.themes = list(found.values())
    return loaded
