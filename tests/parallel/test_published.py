"""The stored published rows are consistent with themselves and with the closed forms."""

from infralens.parallel import megatron_params
from infralens.parallel.published import LLAMA3_405B, MEGATRON_SEQ, MEGATRON_TABLE1, MEGATRON_VOCAB


def test_megatron_rows():
    for r in MEGATRON_TABLE1:
        assert r.tp * r.pp * r.dp == r.gpus
        assert r.batch % (r.dp * r.micro_batch) == 0
        assert r.layers % (r.pp * r.chunks) == 0
        # the aggregate column: per-GPU teraFLOP/s x GPUs, and the percentage of the A100's 312
        assert round(r.tflops_per_gpu / 312 * 100) == r.percent_of_peak
        assert abs(megatron_params(r.layers, r.hidden, MEGATRON_VOCAB, MEGATRON_SEQ) / 1e9
                   - r.params_billion) < 0.05


def test_llama3_rows():
    for r in LLAMA3_405B:
        assert r.tp * r.cp * r.pp * r.dp == r.gpus
        assert r.global_batch * r.seq == 16 * 2**20  # "16M" tokens per batch


def test_llama3_405b_shape_has_the_published_parameter_count():
    from infralens.memory import count_parameters
    from infralens.parallel.published import LLAMA3_405B_SHAPE

    # the released checkpoint's total (Hugging Face model card of Llama-3.1-405B: 405,853,388,800)
    assert count_parameters(LLAMA3_405B_SHAPE).total == 405_853_388_800
