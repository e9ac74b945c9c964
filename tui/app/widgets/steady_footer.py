"""The key bar at the bottom, rebuilt only when the keys it shows change."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


class SteadyFooter(Footer):
    """A :class:`Footer` that is rebuilt only when what it shows changes.

    Textual rebuilds the footer (removes and mounts every key) at each bindings refresh: every
    focus change, and each turn's start and end. Most show the same keys; rebuilt, they cost
    a layout and a repaint of the bottom line in the frame where the chat log changes too.
    """

    _shown: tuple[object, ...] | None = None

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            shown = self._keys(screen)
            if shown == self._shown:
                return
            self._shown = shown
        super().bindings_changed(screen)

    def _keys(self, screen: Screen[Any]) -> tuple[object, ...]:
        """What :meth:`Footer.compose` reads: each key shown, its label, group and state."""
        app = self.app
        keys = tuple(
            (binding.key, app.get_key_display(binding), binding.description, binding.action)
            + (binding.group, enabled, tooltip)
            for _node, binding, enabled, tooltip in screen.active_bindings.values()
            if binding.show
        )
        return (keys, self.compact, self.show_command_palette)
