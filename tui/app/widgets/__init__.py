"""The widgets of the main screen that are not memory panels: header, sessions, chat."""
