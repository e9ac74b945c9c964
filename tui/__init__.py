"""memdeck: a terminal chat app with memory you can see and edit live."""

__version__ = "0.1.0"
