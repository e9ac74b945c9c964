"""The memory panels of the main screen, each a self-contained widget over a MemoryEngine."""

from tui.app.panels.daily_tree import DailyTree
from tui.app.panels.injection_panel import InjectionPanel
from tui.app.panels.memory_editor import MemoryEditor
from tui.app.panels.memory_panels import MemoryPanels
from tui.app.panels.search_panel import SearchPanel
from tui.app.panels.stats_panel import StatsPanel

__all__ = [
    "DailyTree",
    "InjectionPanel",
    "MemoryEditor",
    "MemoryPanels",
    "SearchPanel",
    "StatsPanel",
]
