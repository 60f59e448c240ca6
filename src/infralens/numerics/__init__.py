"""Number formats: what a floating-point format can represent, computed from its bit definition.

* :mod:`~infralens.numerics.formats`: FP32, TF32, BF16, FP16 and the FP8 variants (OCP E4M3 and
  E5M2, and the FNUZ pair), each defined by its sign, exponent and mantissa bits, its bias and
  its special-value convention; the largest finite value, the smallest normal and subnormal
  values and the machine epsilon follow from those, as does the value of every bit pattern.

Import the submodules; the package re-exports nothing, so importing it imports no torch.
"""
