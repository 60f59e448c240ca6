"""The reduction ladder's Python side: bad inputs are refused before anything reaches CUDA; the
machine code of the trees read against their structure; the rungs' sums on a GPU, where there is one."""

import pytest

torch = pytest.importorskip("torch")

from infralens.kernels import library  # noqa: E402
from infralens.kernels.bank_conflicts import tree_strides  # noqa: E402
from infralens.kernels.reduce import (  # noqa: E402
    INPUT_KINDS,
    NCU_REDUCE_METRICS,
    REDUCE_RUNGS,
    SINGLE_KERNEL_VARIANTS,
    TREE_RUNGS,
    ReduceKernels,
    check_reduce_input,
    random_input,
    sass_tree_counts,
)
from infralens.tools import ncu, nvcc  # noqa: E402
from infralens.tools.glue import record  # noqa: E402


@pytest.mark.parametrize("bad, error, message", [
    ([1.0, 2.0], TypeError, "torch.Tensor"),
    (torch.ones(8, dtype=torch.float64), TypeError, "float32"),
    (torch.ones(0), ValueError, "empty"),
    (torch.ones(8, 2).t(), ValueError, "contiguous"),
    (torch.ones(8), ValueError, "CUDA device"),
])
def test_reduce_input_rules(bad, error, message):
    with pytest.raises(error, match=message):
        check_reduce_input(bad)


def test_vector_rungs_need_16_byte_alignment():
    x = torch.ones(9)
    with pytest.raises(ValueError, match="16-byte"):
        check_reduce_input(x[1:], vector=True)  # starts 4 bytes in
    with pytest.raises(ValueError, match="CUDA device"):  # aligned: only the device is wrong
        check_reduce_input(x[4:], vector=True)


needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc is not installed")


@needs_nvcc
def test_bound_launchers_validate_before_launching():
    reduce = ReduceKernels()
    with pytest.raises(ValueError, match="unknown rung"):
        reduce.bind("reduce7_magic", torch.ones(4))
    with pytest.raises(ValueError, match="CUDA device"):
        reduce.sum(torch.ones(1000), "reduce3_sequential")
    with pytest.raises(ValueError, match="not a tree rung"):
        reduce.bind_block_sums("reduce6_grid_stride", torch.ones(4), torch.ones(4))
    with pytest.raises(ValueError, match="CUDA device"):
        reduce.bind_block_sums("reduce3_sequential", torch.ones(1000), torch.ones(4))
    assert reduce.tree_blocks("reduce4_first_add", 513) == 2


@needs_nvcc
def test_kernel_list_matches_the_source():
    named = set(REDUCE_RUNGS) | set(SINGLE_KERNEL_VARIANTS) | {"reduce6_finalize", "copy_vec4"}
    assert named == set(library.kernel_order("reduce"))


@needs_nvcc
def test_single_kernel_variants_validate_before_launching():
    reduce = ReduceKernels()
    for kernel in SINGLE_KERNEL_VARIANTS:
        with pytest.raises(ValueError, match="16-byte"):
            reduce.bind(kernel, torch.ones(9)[1:])  # float4 loads need an aligned start
        with pytest.raises(ValueError, match="CUDA device"):
            reduce.sum(torch.ones(1000), kernel)
    with pytest.raises(ValueError, match="has no fixed grid"):
        reduce.grid_size("reduce3_sequential")


@needs_nvcc
def test_single_kernel_variants_run_rung_6s_loop_and_nothing_else_changed():
    # Both variants call the loop rung 6 uses (one home for it), and keep its resources: no
    # spills, the same shared memory for the block tree (the last-block flag adds one word).
    res = {r.kernel: r for r in library.build("reduce").resources_for("sm_90")}
    source = library.source_path("reduce").read_text()
    assert source.count("grid_stride_thread_sum(x, n)") == 3
    for kernel in SINGLE_KERNEL_VARIANTS:
        r = res[kernel]
        assert r.spill_store_bytes == r.spill_load_bytes == 0
        six = res["reduce6_grid_stride"].shared_bytes
        assert six <= r.shared_bytes <= six + 4


def test_rungs_in_ladder_order_and_the_tree_rungs_between():
    assert [int(r[len("reduce")]) for r in REDUCE_RUNGS] == list(range(7))
    assert TREE_RUNGS == REDUCE_RUNGS[1:6]


@needs_nvcc
def test_tree_blocks_are_the_ceiling_of_n_over_the_elements_per_block():
    # Rungs 1-3 sum one element per thread of a 256-thread block; rungs 4 and 5 add two on load.
    reduce = ReduceKernels()
    for n in (1, 255, 256, 257, 511, 512, 513, 10**6):
        for rung in TREE_RUNGS:
            per_block = 512 if rung in ("reduce4_first_add", "reduce5_warp_shuffle") else 256
            assert reduce.tree_blocks(rung, n) == -(-n // per_block), (rung, n)
    with pytest.raises(ValueError, match="not a tree rung"):
        reduce.tree_blocks("reduce0_atomic", 10)


def test_ncu_metrics_extend_the_shared_ones_without_repeats():
    assert NCU_REDUCE_METRICS[:len(ncu.SHARED_METRICS)] == ncu.SHARED_METRICS
    assert len(set(NCU_REDUCE_METRICS)) == len(NCU_REDUCE_METRICS)
    assert "dram__bytes_read.sum" in NCU_REDUCE_METRICS


# --- the machine code of the trees -----------------------------------------------------------------

def test_sass_tree_counts_reads_between_the_first_and_the_last_barrier():
    ops = ["LDG.E.CONSTANT", "STS", "BAR.SYNC.DEFER_BLOCKING",  # the first store: before the tree
           "LDS", "LDS", "STS", "BAR.SYNC.DEFER_BLOCKING",
           "LDS.64", "BRA", "STS", "BAR.SYNC.DEFER_BLOCKING",
           "LDS", "STG.E", "RED", "BRA"]  # the final read, the atomic, the exit: after it
    assert sass_tree_counts(ops) == {"levels": 2, "lds": 3, "sts": 2, "bra": 1}
    assert sass_tree_counts(["BAR.SYNC", "BAR.SYNC"]) == {"levels": 1, "lds": 0, "sts": 0, "bra": 0}


@pytest.mark.parametrize("ops", [[], ["LDS", "STS", "BRA"], ["STS", "BAR.SYNC.DEFER_BLOCKING", "LDS"]])
def test_sass_tree_counts_needs_two_barriers(ops):
    bars = sum(op.startswith("BAR") for op in ops)
    with pytest.raises(ValueError, match=f"^{bars} barrier\\(s\\) in these ops: a tree has at least two$"):
        sass_tree_counts(ops)


def _expect_tree(ops: list[str], kind: str) -> None:
    """A 256-thread tree: a barrier closes each of its log2(256) = 8 levels, each level loads two
    32-bit words (ptxas may merge them into one LDS.64) and stores one, and nothing branches."""
    counts = sass_tree_counts(ops)
    levels = len(tree_strides(kind, 256))
    bars = [i for i, op in enumerate(ops) if op.startswith("BAR")]
    merged = sum(op.startswith("LDS.64") for op in ops[bars[0]:bars[-1]])
    assert levels == 8
    assert counts == {"levels": levels, "lds": 2 * levels - merged, "sts": levels, "bra": 0}


KINDS = {"reduce1_interleaved_divergent": "interleaved_divergent",
         "reduce2_interleaved_strided": "interleaved_strided", "reduce3_sequential": "sequential"}


def test_sass_tree_counts_of_the_h100_machine_code():
    # The SASS cuobjdump printed for the build that Lab 04's counter cell profiled on an H100.
    sass = record("lab04-reduce-counters").results["sass"]
    assert set(sass) == set(KINDS)
    for rung, kind in KINDS.items():
        _expect_tree(sass[rung], kind)


@pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc is not installed")
def test_sass_tree_counts_of_this_build():
    ops = {rung: nvcc.sass_ops(library.build("reduce").library, rung) for rung in KINDS}
    if any(o is None for o in ops.values()):
        pytest.skip("cuobjdump is not installed")
    for rung, kind in KINDS.items():
        _expect_tree(ops[rung], kind)


# --- random inputs for the correctness checks -------------------------------------------------------

def test_random_integers_are_nonzero_whole_floats_from_minus_8_to_8():
    x = random_input(20_000, "integers", torch.Generator().manual_seed(1), device="cpu")
    assert x.dtype == torch.float32 and x.shape == (20_000,) and x.device.type == "cpu"
    assert torch.equal(x, x.round())
    assert set(x.unique().tolist()) == set(range(-8, 0)) | set(range(1, 9))  # every value, no 0
    assert abs((x > 0).float().mean().item() - 0.5) < 0.02  # signs: a fair coin (sigma 0.0035)


def test_sums_of_random_integers_are_exact_in_any_order():
    # Partial sums stay below 2**24 in magnitude (100,000 x 8 = 800,000), so float32 adds them
    # exactly: any order of summation gives the float64 sum.
    x = random_input(100_000, "integers", torch.Generator().manual_seed(2), device="cpu")
    exact = x.double().sum().item()
    assert x.sum().item() == exact
    assert x.flip(0).cumsum(0)[-1].item() == exact
    assert x.view(-1, 32).sum(0).sum().item() == exact  # a tree of 32 partial sums


def test_random_normal_inputs_are_standard_normal_floats():
    x = random_input(200_000, "normal", torch.Generator().manual_seed(3), device="cpu")
    assert x.dtype == torch.float32 and (x != 0).all()
    x64 = x.double()
    assert abs(x64.mean().item()) < 0.015  # 6.7 standard errors of 1 / sqrt(200,000)
    assert abs(x64.std().item() - 1) < 0.01
    assert abs((x64.abs() < 1).double().mean().item() - 0.6827) < 0.006  # P(|Z| < 1)


@pytest.mark.parametrize("kind", INPUT_KINDS)
def test_random_inputs_repeat_with_the_seed(kind):
    a = random_input(64, kind, torch.Generator().manual_seed(4), device="cpu")
    b = random_input(64, kind, torch.Generator().manual_seed(4), device="cpu")
    c = random_input(64, kind, torch.Generator().manual_seed(5), device="cpu")
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("n, kind, message", [(0, "normal", "n must be >= 1, got 0"),
                                              (-3, "integers", "n must be >= 1, got -3"),
                                              (8, "uniform", "unknown input kind 'uniform'")])
def test_random_input_refuses_bad_arguments_before_any_work(n, kind, message):
    with pytest.raises(ValueError, match=message):
        random_input(n, kind, generator=None)  # no generator needed: nothing is drawn


# --- on a GPU ----------------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available() or nvcc.find_nvcc() is None,
                                reason="needs a CUDA GPU and nvcc")


@needs_cuda
@pytest.mark.parametrize("n", [1, 255, 257, 65_537, 1_000_003])
def test_every_rung_sums_integers_exactly_into_the_poisoned_output(n):
    kernels = ReduceKernels()
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = random_input(n, "integers", gen)
    exact = x.double().sum().item()  # float64 on the GPU, then exact on the host
    for rung in REDUCE_RUNGS:
        got, canary_intact = kernels.sum_poisoned(x, rung, canary=-777.0)
        assert (got, canary_intact) == (exact, True), rung


@needs_cuda
@pytest.mark.parametrize("n", [1, 3, 5, 1023, 1_000_003, 16_777_259])
def test_single_kernel_variants_sum_integers_exactly(n):
    kernels = ReduceKernels()
    x = random_input(n, "integers", torch.Generator(device="cuda").manual_seed(n))
    exact = x.double().sum().item()
    for kernel in SINGLE_KERNEL_VARIANTS:
        got, canary_intact = kernels.sum_poisoned(x, kernel, canary=-777.0)
        assert (got, canary_intact) == (exact, True), kernel


@needs_cuda
def test_last_block_variant_is_deterministic_and_matches_rung_6():
    # Same grid, same per-thread loop, same order of the partials: the same bits as rung 6's two
    # kernels, launch after launch (the counter is zeroed before every launch).
    kernels = ReduceKernels()
    if kernels.grid_size("reduce_grid_last_block") != kernels.grid_size():
        pytest.skip("the two kernels fit a different number of blocks per SM on this GPU")
    x = random_input(4_000_037, "normal", torch.Generator(device="cuda").manual_seed(7))
    runs = {kernels.sum_poisoned(x, "reduce_grid_last_block")[0] for _ in range(5)}
    assert runs == {kernels.sum_poisoned(x, "reduce6_grid_stride")[0]}


@needs_cuda
def test_sum_poisoned_validates_before_launching():
    kernels = ReduceKernels()
    with pytest.raises(ValueError, match="unknown rung"):
        kernels.sum_poisoned(torch.ones(8, device="cuda"), "reduce7_magic")
    with pytest.raises(TypeError, match="float32"):
        kernels.sum_poisoned(torch.ones(8, device="cuda", dtype=torch.float64), "reduce3_sequential")
