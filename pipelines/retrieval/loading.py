"""Heavy libraries and models load with the cyclic garbage collector paused.

Importing sentence-transformers, torch or chromadb and building a model allocate millions of
objects that live for the whole run; each allocation burst triggers collections that walk every
object made so far, about a fifth of the import's CPU (12 of 15 s for sentence-transformers on a
loaded 2-core machine). Nothing they allocate is cyclic garbage worth collecting meanwhile, so
:func:`collector_paused` turns the collector off for the load and back on (if it was on) after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic garbage collection inside the block; the collector's state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
