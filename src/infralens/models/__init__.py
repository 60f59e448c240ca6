"""Model shapes and reference models.

* :mod:`~infralens.models.config`: a Hugging Face ``config.json`` read into one
  :class:`ModelShape` (the sizes every formula in the book takes), for GPT-2, Llama, Mistral,
  Mixtral and Qwen2 families.
* :mod:`~infralens.models.shipped`: the published configs that ship with the package.
* :mod:`~infralens.models.gpt`: a small GPT in PyTorch (imported on its own: it needs torch).

Importing this package does not import torch.
"""

from infralens.models.config import (
    SUPPORTED_FAMILIES,
    ConfigError,
    ConfigLike,
    ModelShape,
    as_shape,
    load_config,
)
from infralens.models.shipped import SOURCES, shipped_config, shipped_config_names

__all__ = [
    "SOURCES", "SUPPORTED_FAMILIES", "ConfigError", "ConfigLike", "ModelShape", "as_shape",
    "load_config", "shipped_config", "shipped_config_names",
]
