"""The Textual app: chat pane, memory panels and background workers on top of the engine."""
