"""Heavy libraries and models load with the cyclic garbage collector paused.

Importing sentence-transformers, torch or chromadb and building a model allocate millions of
objects that live for the whole run; each allocation burst triggers collections that walk every
object made so far, about a fifth of the import's CPU (12 of 15 s for sentence-transformers on a
loaded 2-core machine). Nothing they allocate is cyclic garbage worth collecting meanwhile, so
:func:`collector_paused` turns the collector off for the load and back on (if it was on) after.
It also holds :data:`pipelines.models.load_lock.MODEL_LOADS`: loads in other threads of the process
(an LLM backend's, another embedder's) wait, since a model load swaps process-wide torch state.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from pipelines.models.load_lock import MODEL_LOADS


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic garbage collection inside the block, and no other model load in the process;
    the collector's state is restored after."""
    with MODEL_LOADS:
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if enabled:
                gc.enable()
