"""Published parameter totals of the shipped checkpoints (an independent reference)."""

#: Parameter totals published for each shipped checkpoint (model cards, papers, and
#: ``sum(p.numel() for p in model.parameters())`` of the released weights). Written out here,
#: independently of the code under test.
PUBLISHED_TOTALS: dict[str, int] = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "mistral-7b-v0.1": 7_241_732_096,
    "mixtral-8x7b-v0.1": 46_702_792_704,
    "qwen2-0.5b": 494_032_768,
    "qwen2-7b": 7_615_616_512,
    "tinyllama-1.1b": 1_100_048_384,
}
