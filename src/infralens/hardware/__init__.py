"""Hardware constants with sources: the one place every page takes GPU numbers from.

* :mod:`~infralens.hardware.specs`: the product numbers (SMs, HBM, L2, peak rates per precision,
  NVLink) of the SXM modules (``GPUS``) and of other form factors (``VARIANTS``: H100 PCIe and
  NVL, GB200), and per-SM limits by compute capability, each a :class:`Spec` with its source.
* :mod:`~infralens.hardware.facts`: finer architecture facts (inside the SM, memory-system
  granularities, pipe widths, interconnect links, other vendors), sourced the same way.
* :mod:`~infralens.hardware.derived`: what follows from them (peak rates per precision, ridge
  points, implied clocks).
* :mod:`~infralens.hardware.notation`: the book's symbols.
* :mod:`~infralens.hardware.render`: number formats and the reference page's tables.

The names below are re-exported so a page can write ``from infralens import hardware as hw``
and ``hw.GPUS["h100"]``. Nothing here imports anything outside the standard library.
"""

from infralens.hardware.derived import *  # noqa: F403
from infralens.hardware.derived import __all__ as _derived
from infralens.hardware.facts import *  # noqa: F403
from infralens.hardware.facts import __all__ as _facts
from infralens.hardware.notation import *  # noqa: F403
from infralens.hardware.notation import __all__ as _notation
from infralens.hardware.render import *  # noqa: F403
from infralens.hardware.render import __all__ as _render
from infralens.hardware.specs import *  # noqa: F403
from infralens.hardware.specs import __all__ as _specs

__all__ = [*_specs, *_facts, *_derived, *_notation, *_render]
