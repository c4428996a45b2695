"""DeepSpeed's shared-memory comm op is marked incompatible on the CPU accelerator only, so a CPU
DeepSpeed run does not JIT-compile it (~2 min of C++); other accelerators are left as DeepSpeed probed them."""

from __future__ import annotations

import pytest

pytest.importorskip("deepspeed")

import deepspeed.accelerator  # noqa: E402
import deepspeed.ops  # noqa: E402

from pipelines.training.loading import SHM_COMM_OP, skip_cpu_shm_comm_op  # noqa: E402


class _Accelerator:
    def __init__(self, name: str):
        self.name = name

    def device_name(self, device_index=None) -> str:
        return self.name


@pytest.fixture
def compatible_ops(monkeypatch) -> dict:
    """DeepSpeed's probed dict (probed with the real accelerator, before any test swaps it), the shm entry
    set True as the probe finds it where a compiler exists; monkeypatch restores it after the test."""
    ops = deepspeed.ops.__compatible_ops__
    monkeypatch.setitem(ops, SHM_COMM_OP, True)
    return ops


def test_cpu_accelerator_marks_the_shm_op_incompatible(compatible_ops, monkeypatch, caplog):
    monkeypatch.setattr(deepspeed.accelerator, "get_accelerator", lambda: _Accelerator("cpu"))
    with caplog.at_level("INFO", logger="pipelines.training.loading"):
        assert skip_cpu_shm_comm_op() is True
    assert deepspeed.ops.__compatible_ops__[SHM_COMM_OP] is False
    assert "gloo" in caplog.text and SHM_COMM_OP in caplog.text


def test_real_accelerator_on_this_cpu_machine(compatible_ops):
    """No mock: on a machine without CUDA DeepSpeed's own accelerator is the CPU one."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine: DeepSpeed's accelerator is not the CPU one")
    assert skip_cpu_shm_comm_op() is True
    assert deepspeed.ops.__compatible_ops__[SHM_COMM_OP] is False


def test_other_accelerators_are_left_alone(compatible_ops, monkeypatch):
    monkeypatch.setattr(deepspeed.accelerator, "get_accelerator", lambda: _Accelerator("cuda"))
    assert skip_cpu_shm_comm_op() is False
    assert deepspeed.ops.__compatible_ops__[SHM_COMM_OP] is True
