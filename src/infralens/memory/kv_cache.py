"""Bytes of the key/value cache that autoregressive decoding keeps per sequence.

To generate token ``t+1`` a model attends over the keys and values of tokens ``1..t``.
Without a cache, every step needs a forward pass over the whole prefix (each layer's keys
and values depend on the previous layer's hidden states): ``O(t)`` work per new token and
``O(t^2)`` over a generation. So inference servers keep them: for every layer, every
sequence in the batch and every position, one key vector and one value vector per *KV
head*. That is why grouped-query attention (fewer KV heads than
query heads) matters so much for serving: Llama-3-70B has 64 query heads but stores K and V
for only 8, an 8x smaller cache than multi-head attention would need.

What this does not model: a sliding-window model (Mistral-7B-v0.1 with ``sliding_window =
4096``) *can* keep only the last window in a ring buffer; this is the full-length cache,
which is what a server allocates when it does not exploit the window. Paged allocation
(vLLM's block tables) rounds each sequence up to whole blocks; that slack is not here either.
"""

from __future__ import annotations

from infralens.models.config import ConfigLike, as_shape
from infralens.tools.checks import require_positive


def kv_cache_bytes_per_token(config: ConfigLike, bytes_per_elem: int = 2) -> int:
    """Cache bytes one token adds to one sequence, across all layers."""
    return kv_cache_bytes(config, batch=1, seq_len=1, bytes_per_elem=bytes_per_elem)


def kv_cache_bytes(config: ConfigLike, batch: int, seq_len: int, bytes_per_elem: int = 2) -> int:
    """Bytes of a full-length KV cache: ``2 · L · batch · seq_len · n_kv_heads · head_dim · bytes``.

    ``bytes_per_elem`` is 2 for fp16/bf16, 1 for an fp8 cache, 4 for fp32.

    Raises:
        ValueError: ``batch``, ``seq_len`` or ``bytes_per_elem`` is not a positive integer.
    """
    require_positive(batch=batch, seq_len=seq_len, bytes_per_elem=bytes_per_elem)
    shape = as_shape(config)
    # [memory:kv-cache]
    # Per token and layer: one key and one value vector for each KV head (not query head).
    k_and_v = 2
    per_token_per_layer = k_and_v * shape.n_kv_heads * shape.head_dim
    # Full length: every layer keeps every token of every sequence in the batch.
    elements = shape.n_layers * batch * seq_len * per_token_per_layer
    return elements * bytes_per_elem
    # [/memory:kv-cache]
