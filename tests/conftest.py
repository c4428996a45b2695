"""Test session defaults: offline, no tracking, deterministic; the `gpu` marker skips without CUDA.

`make test` runs the suite on 2 pytest-xdist workers, one file per work unit (``--dist loadfile``):
each worker and the stages it starts get an equal share of the cores (``OMP_NUM_THREADS``), and the
files of tests marked ``first`` (the longest) are handed out before the others, so the run does not
end waiting for one of them."""

import os

if workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(workers))))

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


def _longest_files_first(items) -> None:
    """Stable reorder: files holding a ``first`` test, then files holding a ``slow`` one, then the
    rest; each file's tests stay together and in order (module fixtures are built once)."""
    rank: dict[str, int] = {}
    for item in items:
        weight = 0 if "first" in item.keywords else 1 if "slow" in item.keywords else 2
        rank[item.fspath.strpath] = min(rank.get(item.fspath.strpath, 2), weight)
    position = {path: index for index, path in enumerate(dict.fromkeys(i.fspath.strpath for i in items))}
    items.sort(key=lambda item: (rank[item.fspath.strpath], position[item.fspath.strpath]))


def pytest_collection_modifyitems(config, items):
    _longest_files_first(items)
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (marked gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _torch_threads(count: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def one_torch_thread():
    """One intra-op torch thread (on shared CPU cores two threads spin against each other, ~5x slower)."""
    yield from _torch_threads(1)


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def each_torch_thread_count(request):
    """The test once on one intra-op torch thread and once on two (another float summation order), in
    the same process and run: a test that assumes bit-exact floats across thread counts fails on any machine."""
    yield from _torch_threads(request.param)
