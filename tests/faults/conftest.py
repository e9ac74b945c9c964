"""Fixtures of the app-level fault tests: the fake server and a chat engine over a small
workspace (a module with other needs defines its own ``server`` / ``engine``)."""

from support.pilot import small_app_engine, small_app_server

__all__ = ["small_app_engine", "small_app_server"]  # fixtures: ``engine`` and ``server``
