"""The constructed outlier layer has the properties its docstring promises."""

import torch

from infralens.quant.synthetic import outlier_layer


def test_outliers_correlation_and_determinism():
    w, x, x_test = outlier_layer(n=32, k=64, samples=512, outliers=3, outlier_scale=20.0, seed=1,
                                 held_out=256)
    assert w.shape == (32, 64) and x.shape == (512, 64) and x.dtype == torch.float64
    assert x_test.shape == (256, 64)
    rms_test = x_test.pow(2).mean(0).sqrt()
    rms_cal = x.pow(2).mean(0).sqrt()
    assert torch.equal(rms_test > 5 * rms_test.median(), rms_cal > 5 * rms_cal.median())
    rms = x.pow(2).mean(0).sqrt()
    big = rms > 5 * rms.median()
    assert int(big.sum()) == 3
    c = torch.corrcoef(x[:, ~big].T)
    off = c - torch.diag(torch.diag(c))
    assert off.abs().max() > 0.2                          # mixed features are correlated
    w2, x2, _ = outlier_layer(n=32, k=64, samples=512, outliers=3, outlier_scale=20.0, seed=1,
                              held_out=256)
    assert torch.equal(w, w2) and torch.equal(x, x2)
