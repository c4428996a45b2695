"""Test session defaults: offline, no tracking, deterministic; the `gpu` marker skips without CUDA."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ["EDUMAS_TRACKING"] = "0"
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (marked gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def one_torch_thread():
    """One intra-op torch thread (on shared CPU cores two threads spin against each other, ~5x
    slower), or ``EDUMAS_TEST_TORCH_THREADS`` of them: `make test` runs the transformers-backend
    tests a second time with 2 threads, so a test that depends on float order fails on any machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("EDUMAS_TEST_TORCH_THREADS", "1")))
    yield
    torch.set_num_threads(before)
