"""The L2 read sweep: its launch plan, and its kernel run by Triton's interpreter on the CPU,
checked against a float64 sum of the blocks each program must have read."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.gpuarch import cache_sweep as cs  # noqa: E402


def test_plan_reads_at_least_the_total_in_whole_steps():
    p = cs.plan(3 * cs.BLOCK_BYTES, 10 * cs.BLOCK_BYTES, programs=4)
    assert p["n_blocks"] == 3
    assert p["reads_per_program"] == 3                  # ceil(10 / 4)
    assert p["bytes_read"] == 12 * cs.BLOCK_BYTES       # 3 steps of 4 programs
    assert p["passes"] == pytest.approx(4.0)            # 12 block reads over 3 blocks


@pytest.mark.parametrize("ws, total, programs, message", [
    (cs.BLOCK_BYTES + 4, 4 * cs.BLOCK_BYTES, 2, "multiple of"),
    (0, cs.BLOCK_BYTES, 2, "multiple of"),
    (4 * cs.BLOCK_BYTES, cs.BLOCK_BYTES, 2, "must cover"),
    (cs.BLOCK_BYTES, cs.BLOCK_BYTES, 0, "programs must be"),
])
def test_plan_refuses_bad_shapes(ws, total, programs, message):
    with pytest.raises(ValueError, match=message):
        cs.plan(ws, total, programs)


def test_each_program_sums_the_blocks_it_was_assigned():
    torch.manual_seed(0)
    ws, programs = 5 * cs.BLOCK_BYTES, 3
    p, launch, x, out = cs._launcher(ws, 13 * cs.BLOCK_BYTES, device="cpu", programs=programs)
    launch()
    blocks = x.double().reshape(p["n_blocks"], -1).sum(dim=1)
    expected = [sum(blocks[(pid + i * programs) % p["n_blocks"]] for i in range(p["reads_per_program"]))
                for pid in range(programs)]
    assert torch.allclose(out.double(), torch.stack(expected), rtol=1e-5, atol=1e-3)


def test_bandwidth_is_bytes_read_over_the_median_time():
    r = cs.measure_read_bandwidth(2 * cs.BLOCK_BYTES, 4 * cs.BLOCK_BYTES, device="cpu", programs=2,
                                  rep_ms=5)
    assert r["bytes_read"] == 4 * cs.BLOCK_BYTES
    assert r["bytes_per_s"] == pytest.approx(r["bytes_read"] / (r["ms"] * 1e-3))
