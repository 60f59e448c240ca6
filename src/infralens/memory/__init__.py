"""Where the memory of a transformer goes: parameters, activations, KV cache and the ledgers.

Read a model's Hugging Face ``config.json``, count its parameters exactly, and turn the count
into the two budgets that decide which GPU a job needs:

* training: weights + gradients + master weights + optimizer states + activations;
* inference: weights + KV cache.

Every function is pure integer arithmetic; nothing here imports torch.

>>> from infralens.memory import count_parameters
>>> from infralens.models import shipped_config
>>> f"{count_parameters(shipped_config('gpt2')).total:,}"
'124,439,808'
"""

from infralens.memory.activations import (
    ACTIVATION_TERMS,
    RECOMPUTE_MODES,
    ActivationTerm,
    LlamaLayerActivations,
    activation_breakdown,
    activation_bytes_per_layer,
    llama_activation_bytes_per_layer,
)
from infralens.memory.kv_cache import kv_cache_bytes, kv_cache_bytes_per_token
from infralens.memory.ledger import (
    NOT_IN_LEDGER,
    InferenceLedger,
    TrainingEstimate,
    TrainingLedger,
    inference_ledger,
    training_estimate,
    training_ledger,
)
from infralens.memory.params import (
    GapTerm,
    ParamCount,
    TeachingEstimate,
    active_parameters,
    count_parameters,
    teaching_formula,
    teaching_gap,
)
from infralens.memory.zero import zero_model_state_bytes as zero_model_state_bytes

__all__ = [
    "ACTIVATION_TERMS",
    "NOT_IN_LEDGER",
    "RECOMPUTE_MODES",
    "ActivationTerm",
    "GapTerm",
    "InferenceLedger",
    "LlamaLayerActivations",
    "ParamCount",
    "TeachingEstimate",
    "TrainingEstimate",
    "TrainingLedger",
    "activation_breakdown",
    "active_parameters",
    "activation_bytes_per_layer",
    "count_parameters",
    "inference_ledger",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "llama_activation_bytes_per_layer",
    "teaching_formula",
    "teaching_gap",
    "training_estimate",
    "training_ledger",
]
