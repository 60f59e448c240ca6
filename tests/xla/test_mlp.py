import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from infralens.models.gpt import MLP, GPTConfig
from infralens.xla.mlp import from_torch, init_mlp, mlp, mlp_flops


def _gelu_tanh64(h):
    return 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))


def test_the_jax_mlp_equals_the_pytorch_module_and_a_float64_reference():
    torch.manual_seed(0)
    module = MLP(GPTConfig(d_model=24, n_heads=2, d_ff=40)).eval()
    torch.nn.init.normal_(module.fc.bias)
    torch.nn.init.normal_(module.proj.bias)
    x = torch.randn(5, 24)
    params = from_torch(module)
    got = np.asarray(mlp(params, jnp.asarray(x.numpy())))
    w1, b1 = module.fc.weight.detach().double().numpy().T, module.fc.bias.detach().double().numpy()
    w2, b2 = module.proj.weight.detach().double().numpy().T, module.proj.bias.detach().double().numpy()
    ref = _gelu_tanh64(x.double().numpy() @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got, module(x).numpy(), rtol=1e-5, atol=1e-5)


def test_init_splits_the_key_and_keeps_shapes():
    params = init_mlp(jax.random.key(0), 8, 32)
    assert params["fc"]["w"].shape == (8, 32) and params["proj"]["w"].shape == (32, 8)
    assert not np.allclose(np.asarray(params["fc"]["w"]).ravel()[:8],
                           np.asarray(params["proj"]["w"]).ravel()[:8])
    assert jax.tree.leaves(init_mlp(jax.random.key(0), 8, 32, bias=False)).__len__() == 2


def test_mlp_flops_counts_two_gemms():
    assert mlp_flops(3, 4, 5) == 2 * (2 * 3 * 4 * 5)
    with pytest.raises(ValueError):
        mlp_flops(0, 4, 5)
