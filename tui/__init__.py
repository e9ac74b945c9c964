"""memdeck: a terminal chat app with memory you can see and edit live."""

import os

__version__ = "0.1.0"

# One BLAS thread: a query is a single matrix-vector product, and spinning BLAS threads fight
# onnxruntime and SQLite for the two cores (tests/bench/search.py measured 0.9 ms vs 6.2 ms for
# the 10k exact KNN). Must happen before numpy is first imported; a user's setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
