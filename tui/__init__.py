"""memdeck: a terminal chat app with memory you can see and edit live.

Importing this package (or :mod:`tui.engine` as a library) changes nothing in the process: the
thread and allocator settings are made by the entry points (:mod:`tui.main`), see
:func:`tui.engine.heap.tune_process`.
"""

__version__ = "0.1.0"
