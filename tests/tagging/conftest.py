"""Shared fixtures of the tagging tests."""

import pytest


@pytest.fixture
def one_torch_thread():
    """On shared CPU cores two intra-op threads spin against each other (measured ~5x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
