"""Number formats: what a floating-point format can represent, computed from its bit definition.

* :mod:`~infralens.numerics.formats`: FP32, TF32, BF16, FP16 and the FP8 variants (OCP E4M3 and
  E5M2, and the FNUZ pair), each defined by its sign, exponent and mantissa bits, its bias and
  its special-value convention; the largest finite value, the smallest normal and subnormal
  values and the machine epsilon follow from those, as does the value of every bit pattern.

* :mod:`~infralens.numerics.rounding`: round an exact number to any format (ties to even,
  gradual underflow, each format's overflow rule); the unit roundoff and the spacing.
* :mod:`~infralens.numerics.summation`: recursive, pairwise and Kahan sums, narrow accumulators,
  and three ways to compute a variance, with Higham's bounds.
* :mod:`~infralens.numerics.scaling`: dynamic loss scaling, FP8 delayed scaling and
  quantization, stochastic rounding to BF16.
* :mod:`~infralens.numerics.stability`: stable log-sum-exp, z-loss, soft-capping, and a finder
  for the first non-finite module output.
* :mod:`~infralens.numerics.matmul_error` and :mod:`~infralens.numerics.determinism`: GPU probes
  (they run on the CPU too) of a library matmul's error per precision mode and of run-to-run and
  batch-size variation.

Import the submodules; the package re-exports nothing, so importing it imports no torch.
"""
