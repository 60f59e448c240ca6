"""Shared test setup: the book's extension package lives in conf/_ext; Triton runs interpreted.

``TRITON_INTERPRET=1`` must be set before the first ``import triton`` of the session, and not only
the Triton test modules import it (``torch.utils.flop_counter`` does too): set here, it no longer
depends on the order in which pytest collects the test modules. Tests that need Triton's real
compiler run it in a subprocess without the variable. JAX's simulated CPU devices are set here for
the same reason.
"""

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
# JAX reads its CPU device count once, when its backend starts: eight, for the mesh tests.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "conf" / "_ext"))
