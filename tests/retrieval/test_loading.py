"""Heavy loads run with the garbage collector paused, and its state is restored after."""

from __future__ import annotations

import gc

import pytest

from pipelines.retrieval.loading import collector_paused


def test_the_collector_is_off_inside_and_as_before_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed load")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off: it stays off
    finally:
        gc.enable()
