"""Attention with grouped heads, a KV cache, and why the logits are divided by sqrt(d_k).

Shapes (nanoGPT-style legend): B batch, a query heads, a_kv key/value heads, g = a / a_kv
query heads per KV head (the group), S_q query positions, S_k key positions, d head dimension.

* Multi-head attention (MHA) is a_kv = a; multi-query attention (MQA) is a_kv = 1;
  grouped-query attention (GQA) is anything in between. The code below never copies K or V
  ``g`` times: it views the queries as (B, a_kv, g, S_q, d) and lets each group of g query
  heads read its one K and V by broadcasting.
* :class:`KVCache` is the state decoding keeps per layer: K and V of every past token,
  (B, a_kv, S_max, d) each, filled left to right.
* Split keys, merged outputs: :func:`split_kv_attention` (Flash-Decoding), :func:`ring_attention`
  (context parallelism) and :func:`cascade_attention` (a prefix shared by a batch) each attend to
  chunks of the keys separately and merge the partial results by their log-sum-exp
  (:func:`combine_partials`), the merge rule of online softmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from infralens.attention.masks import causal_mask


# [attention:gqa]
def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            causal: bool = True, window: int | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v with a_kv <= a heads; q (B, a, S_q, d), k, v (B, a_kv, S_k, d).

    The causal mask is bottom-right aligned: the S_q queries are the last S_q positions.
    """
    B, a, S_q, d = q.shape
    a_kv, S_k = k.shape[1], k.shape[2]
    if a % a_kv:
        raise ValueError(f"{a} query heads cannot be split into groups over {a_kv} KV heads")
    g = a // a_kv
    qg = q.view(B, a_kv, g, S_q, d)  # query head h belongs to KV head h // g
    scores = qg @ k[:, :, None].transpose(-1, -2) / math.sqrt(d)  # (B, a_kv, g, S_q, S_k)
    if causal:
        visible = causal_mask(S_q, S_k, window=window).to(q.device)
        scores = scores.masked_fill(~visible, float("-inf"))
    p = torch.softmax(scores, dim=-1)  # each row sums to 1 over the visible keys
    out = p @ v[:, :, None]  # (B, a_kv, g, S_q, d): the same V serves the whole group
    return out.reshape(B, a, S_q, d)
# [/attention:gqa]


# [attention:kv-cache]
@dataclass
class KVCache:
    """K and V of every token seen so far, for one layer: (B, a_kv, max_len, d) each."""

    k: torch.Tensor
    v: torch.Tensor
    length: int = 0  # tokens filled so far (the same for every sequence here)

    @classmethod
    def empty(cls, batch: int, n_kv_heads: int, max_len: int, head_dim: int,
              dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> KVCache:
        shape = (batch, n_kv_heads, max_len, head_dim)
        return cls(torch.zeros(shape, dtype=dtype, device=device),
                   torch.zeros(shape, dtype=dtype, device=device))

    def append(self, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new tokens' K and V (B, a_kv, t, d) and return views of the whole prefix."""
        t = k_new.shape[2]
        if self.length + t > self.k.shape[2]:
            raise ValueError(f"cache holds {self.k.shape[2]} tokens; {self.length + t} needed")
        self.k[:, :, self.length:self.length + t] = k_new  # written once, read every later step
        self.v[:, :, self.length:self.length + t] = v_new
        self.length += t
        return self.k[:, :, :self.length], self.v[:, :, :self.length]
# [/attention:kv-cache]


@dataclass(frozen=True)
class ScoreStats:
    """What random logits look like at one head dimension (see :func:`score_statistics`)."""

    head_dim: int
    scaled: bool
    logit_std: float  # standard deviation of q.k (or q.k / sqrt(d))
    max_prob: float  # mean over rows of the largest softmax probability
    saturated: float  # fraction of rows whose largest probability exceeds ``threshold``
    entropy_bits: float = field(default=0.0)  # mean entropy of a row, in bits
    threshold: float = 0.99


def score_statistics(head_dim: int, n_keys: int = 256, n_rows: int = 256, scaled: bool = True,
                     seed: int = 0, threshold: float = 0.99) -> ScoreStats:
    """Softmax rows over n_keys random keys, with q and k components i.i.d. N(0, 1).

    Without the 1/sqrt(d) scale the logits have variance d, so the softmax saturates towards a
    one-hot row as d grows. Saturation is what the statistics measure: the largest probability,
    the share of rows that put more than ``threshold`` on one key, and the entropy. (The
    gradient of p with respect to a logit z_j is p_j (e_j - p): it vanishes for every non-max
    logit as p approaches one-hot, and for the max logit too, since p_max (1 - p_max) -> 0.)
    """
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_rows, head_dim, generator=gen, dtype=torch.float64)
    k = torch.randn(n_keys, head_dim, generator=gen, dtype=torch.float64)
    logits = q @ k.T / (math.sqrt(head_dim) if scaled else 1.0)  # (n_rows, n_keys)
    p = torch.softmax(logits, dim=-1)
    top = p.max(-1).values
    entropy = -(p * torch.log2(p.clamp_min(1e-300))).sum(-1)
    return ScoreStats(head_dim, scaled, float(logits.std()), float(top.mean()),
                      float((top > threshold).double().mean()), float(entropy.mean()), threshold)


# [attention:split-kv]
def split_kv_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       n_splits: int) -> torch.Tensor:
    """Flash-Decoding's idea: attend to chunks of the keys independently, then merge.

    q (..., S_q, d) attends to every key (no mask, as for one decoding query); k, v (..., S_k, d)
    are cut into ``n_splits`` chunks along S_k, which a GPU would give to different thread blocks.
    """
    outs, lses = [], []
    for k_c, v_c in zip(k.chunk(n_splits, dim=-2), v.chunk(n_splits, dim=-2), strict=True):
        s = q @ k_c.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (..., S_q, chunk)
        lses.append(torch.logsumexp(s, dim=-1))  # (..., S_q): log of this chunk's normalizer
        outs.append(torch.softmax(s, dim=-1) @ v_c)  # (..., S_q, d): normalized within the chunk
    return combine_partials(outs, lses)


def combine_partials(outs: list[torch.Tensor], lses: list[torch.Tensor]) -> torch.Tensor:
    """Merge per-chunk outputs: each is weighted by its share of the total normalizer."""
    lse = torch.logsumexp(torch.stack(lses), dim=0)  # (..., S_q): the whole row's log-sum-exp
    return sum(torch.exp(l_c - lse)[..., None] * o_c for o_c, l_c in zip(outs, lses, strict=True))
# [/attention:split-kv]


# [attention:partial]
def partial_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of q (..., S_q, d) over one chunk of keys k, v (..., S_k, d), normalized within the
    chunk, and the chunk's log-sum-exp per query row: what :func:`combine_partials` merges.

    ``mask`` (S_q, S_k) marks the visible keys. A row that sees no key of the chunk gets output 0
    and log-sum-exp -inf: the empty state, which a merge ignores.
    """
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (..., S_q, S_k)
    if mask is not None:
        s = s.masked_fill(~mask.to(s.device), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (..., S_q)
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)  # no -inf - (-inf)
    return torch.exp(s - safe[..., None]) @ v, lse
# [/attention:partial]


# [attention:ring]
def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_devices: int, *,
                   causal: bool = False) -> torch.Tensor:
    """Context parallelism as ring attention does it, on one machine: the sequence is cut into
    ``n_devices`` chunks; device p keeps its queries and its key/value chunk, the key/value chunks
    travel round the ring, and at step t device p attends to the chunk of device p - t and keeps
    the partial result. The partials merge by log-sum-exp, in any order.

    Causal: chunks after p hold only future keys and are skipped; p's own chunk is masked.
    q, k, v are (..., S, d) with one S (self-attention).
    """
    qs, ks, vs = (t.chunk(n_devices, dim=-2) for t in (q, k, v))
    outs = []
    for p in range(len(qs)):
        parts, lses = [], []
        for step in range(len(ks)):
            j = (p - step) % len(ks)  # the key/value chunk that reaches device p at this step
            if causal and j > p:
                continue  # every key of chunk j comes after every query of chunk p
            mask = causal_mask(qs[p].shape[-2], ks[j].shape[-2]) if causal and j == p else None
            o, lse = partial_attention(qs[p], ks[j], vs[j], mask)
            parts.append(o)
            lses.append(lse)
        outs.append(combine_partials(parts, lses))
    return torch.cat(outs, dim=-2)
# [/attention:ring]


# [attention:cascade]
def cascade_attention(q: torch.Tensor, k_shared: torch.Tensor, v_shared: torch.Tensor,
                      k_own: torch.Tensor, v_own: torch.Tensor) -> torch.Tensor:
    """Attention of B sequences that share a prefix, its K and V stored once.

    q (B, h, S_q, d) are the last S_q positions of each sequence; k_shared, v_shared (h, P, d)
    are the prefix, one copy for the batch; k_own, v_own (B, h, S_own, d) each sequence's own
    tokens after it. The prefix part is one attention of all B * S_q queries against the one
    prefix (a matmul with B * S_q rows, the prefix read once for the batch); the own part is per
    sequence, causal and bottom-right aligned; the two merge by log-sum-exp.
    """
    B, h, S_q, d = q.shape
    q_all = q.transpose(0, 1).reshape(h, B * S_q, d)  # every query of a head in one matrix
    o_shared, l_shared = partial_attention(q_all, k_shared, v_shared)  # (h, B * S_q, d)
    o_shared = o_shared.reshape(h, B, S_q, d).transpose(0, 1)
    l_shared = l_shared.reshape(h, B, S_q).transpose(0, 1)
    o_own, l_own = partial_attention(q, k_own, v_own, causal_mask(S_q, k_own.shape[-2]))
    return combine_partials([o_shared, o_own], [l_shared, l_own])
# [/attention:cascade]
