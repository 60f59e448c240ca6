"""The profiler readings: interval arithmetic checked by hand, a CPU step read end to end, the
profiler's silencer checked at the file-descriptor level, and kernel lists on a GPU."""

import os
import warnings

import pytest
import torch
import torch.nn.functional as F

from infralens.models.gpt import GPTConfig
from infralens.profiling.trace import cuda_kernels, idle_gaps, profile_step, quiet_profiler


def test_idle_gaps_merges_overlaps_and_clips_to_the_window():
    busy, idle = idle_gaps([(0, 4), (2, 6), (8, 9), (12, 20)], 1, 15)
    assert busy == (6 - 1) + (9 - 8) + (15 - 12)
    assert idle == 14 - busy
    assert idle_gaps([], 0, 10) == (0.0, 10.0)


def test_cpu_step_readings():
    cfg = GPTConfig(vocab_size=128, n_positions=32, d_model=32, n_layers=2, n_heads=4)
    p = profile_step(cfg, 2, 32, warmup=1)
    assert p.device == "cpu" and p.launches == 0 and p.kernel_us == 0
    assert 0 < p.busy_us <= p.step_us and p.gaps_us == pytest.approx(p.step_us - p.busy_us)
    names = [r["name"] for r in p.top]
    assert any(n in names for n in ("aten::mm", "aten::addmm", "aten::bmm"))  # the matmuls show up
    assert all(r["self_us"] >= 0 and r["count"] >= 1 for r in p.top)
    assert p.top == sorted(p.top, key=lambda r: -r["self_us"])
    assert p.host_us == pytest.approx(p.step_us)  # on the CPU the window is the step's range


def test_unprofiled_step_time():
    from infralens.profiling.trace import time_step

    cfg = GPTConfig(vocab_size=128, n_positions=32, d_model=32, n_layers=1, n_heads=4)
    assert 0 < time_step(cfg, 1, 16, device="cpu", steps=2, amp=False) < 10


# --- quiet_profiler: file descriptor 2 silenced, then restored ---------------------------------

def test_quiet_profiler_silences_fd_2_and_restores_it(capfd):
    def fds() -> list[str]:
        return sorted(os.listdir("/proc/self/fd"))

    before = os.fstat(2)
    open_before = fds()
    filters = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_profiler():
            os.write(2, b"written to fd 2 inside")
            warnings.warn("a warning inside", stacklevel=1)
            inside = os.fstat(2)
        warnings.warn("a warning after", stacklevel=1)
    os.write(2, b"written after")
    after = os.fstat(2)
    assert (inside.st_dev, inside.st_ino) == (os.stat(os.devnull).st_dev, os.stat(os.devnull).st_ino)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert [str(w.message) for w in caught] == ["a warning after"]
    assert list(warnings.filters) == filters
    assert fds() == open_before  # the saved and the devnull descriptors are closed
    assert capfd.readouterr().err == "written after"


def test_quiet_profiler_restores_fd_2_after_an_exception(capfd):
    with pytest.raises(RuntimeError, match="inside"), quiet_profiler():
        os.write(2, b"lost")
        raise RuntimeError("inside")
    os.write(2, b"kept")
    assert capfd.readouterr().err == "kept"


# --- cuda_kernels: the kernels one call launches ---------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_kernels_lists_one_kernel_per_eager_elementwise_op():
    x, r = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, device="cuda")
    add = cuda_kernels(torch.add, x, r)
    assert len(add) == 1 and "add" in add[0].lower()
    # three eager ops, three kernels, in launch order: add, gelu, add
    three = cuda_kernels(lambda: r + F.gelu(x + b, approximate="tanh"))
    assert len(three) == 3
    assert "add" in three[0].lower() and "gelu" in three[1].lower() and "add" in three[2].lower()
    assert cuda_kernels(lambda: None) == []
    assert cuda_kernels(lambda t: t.cpu(), torch.ones(4)) == []  # CPU work launches nothing
