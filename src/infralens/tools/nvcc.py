"""nvcc, ptxas, PTX and SASS: compile a ``.cu`` file and read what the compiler made of it.

* :func:`build` compiles one ``.cu`` file into a shared library for sm_90 and sm_80 (plus sm_90
  PTX, which newer GPUs compile when they load it), with ``-Xptxas -v``. The library and the
  compiler's report go to a cache folder outside the repository (``~/.cache/infralens/cuda``, or
  ``$INFRALENS_CACHE``), keyed by a hash of the source, the flags and the nvcc version, so a page
  rebuilds only when the source changes. Without nvcc it raises :class:`NvccNotFound`, and
  :func:`find_nvcc` lets a caller say so instead.
* :func:`parse_ptxas` turns the report into one :class:`KernelResources` per kernel and
  architecture: registers, shared memory, barriers, stack frame and spills.
* :func:`ptx` and :func:`sass_ops` show the code before and after ptxas.

Which ``.cu`` files exist and how they are launched is the business of the packages that hold
them (:mod:`infralens.kernels.library`, :mod:`infralens.gpuarch.occupancy_probe`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

ARCHS = ("sm_90", "sm_80")  # Hopper (H100, H200) and Ampere (A100)
# -O3 host and device code; -Xptxas -v makes ptxas print each kernel's resources; -lineinfo lets
# Nsight Compute map counters to source lines without changing the generated code.
NVCC_FLAGS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo", "-Xptxas", "-v")


class BuildError(RuntimeError):
    """nvcc failed (the message ends with the tail of its output)."""


class NvccNotFound(BuildError):
    """No nvcc on this machine: kernels cannot be compiled here."""



# --- building ---------------------------------------------------------------------------------

def find_nvcc() -> str | None:
    """The nvcc to use: ``$INFRALENS_NVCC`` (empty or ``none`` means none), else PATH, else CUDA_HOME."""
    env = os.environ.get("INFRALENS_NVCC")
    if env is not None:
        return None if env.strip().lower() in ("", "none") else env
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and Path(home, "bin", "nvcc").is_file():
            return str(Path(home, "bin", "nvcc"))
    return None


def nvcc_version(nvcc: str) -> str:
    """``release 13.0, V13.0.88`` from ``nvcc --version``."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release [\d.]+, V[\d.]+", out)
    return match.group(0) if match else out.strip().splitlines()[-1]


def cache_dir() -> Path:
    """Where built libraries live: ``$INFRALENS_CACHE``, else ``$XDG_CACHE_HOME/infralens`` or
    ``~/.cache/infralens``, each with a ``cuda`` subfolder; the system temp folder if not writable."""
    if os.environ.get("INFRALENS_CACHE"):
        base = Path(os.environ["INFRALENS_CACHE"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "infralens"
    for folder in (base / "cuda", Path(tempfile.gettempdir()) / "infralens-cache" / "cuda"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            continue
    raise BuildError("no writable cache folder for CUDA builds (set INFRALENS_CACHE)")


def gencode_flags(archs: Sequence[str] = ARCHS) -> list[str]:
    """Machine code for each ``sm_XY`` and PTX for the newest, so later GPUs can JIT-compile it."""
    flags = []
    for arch in archs:
        if not re.fullmatch(r"sm_\d+a?", arch):
            raise ValueError(f"architecture {arch!r}: expected sm_XY (for example sm_90)")
        flags.append(f"-gencode=arch=compute_{arch[3:]},code={arch}")
    newest = max(archs, key=lambda a: int(re.sub(r"\D", "", a)))
    flags.append(f"-gencode=arch=compute_{newest[3:]},code=compute_{newest[3:]}")
    return flags


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel on one architecture."""

    kernel: str
    arch: str
    registers: int           # per thread
    shared_bytes: int        # static shared memory per block
    barriers: int            # named barriers used (__syncthreads uses barrier 0)
    stack_bytes: int         # stack frame per thread (local memory)
    spill_store_bytes: int   # registers spilled to local memory ...
    spill_load_bytes: int    # ... and loaded back
    constant_bytes: int | None = None  # cmem[0] (kernel parameters), where ptxas prints it


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")


def _field(line: str, pattern: str, default: int | None = 0) -> int | None:
    hit = re.search(pattern, line)
    return int(hit.group(1)) if hit else default


def parse_ptxas(text: str) -> list[KernelResources]:
    """Every kernel entry of an ``-Xptxas -v`` report, in the order ptxas printed them."""
    found: list[KernelResources] = []
    entry: tuple[str, str] | None = None
    props_for: str | None = None
    frame = (0, 0, 0)
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            entry, props_for, frame = (m.group(1), m.group(2)), None, (0, 0, 0)
        elif m := _PROPS.search(line):
            props_for = m.group(1)
        elif (m := _FRAME.search(line)) and entry and props_for == entry[0]:
            frame = tuple(int(g) for g in m.groups())
        elif (m := _USED.search(line)) and entry:
            found.append(KernelResources(
                kernel=entry[0], arch=entry[1], registers=int(m.group(1)),
                shared_bytes=_field(line, r"(\d+) bytes smem"),
                barriers=_field(line, r"used (\d+) barriers"),
                stack_bytes=frame[0], spill_store_bytes=frame[1], spill_load_bytes=frame[2],
                constant_bytes=_field(line, r"(\d+) bytes cmem\[0\]", None)))
            entry = None
    return found


def kernel_order(source: Path) -> list[str]:
    """The ``__global__`` functions of a source file, in the order they are defined (a
    ``__launch_bounds__(...)`` between ``void`` and the name is allowed)."""
    text = Path(source).read_text(encoding="utf-8")
    return re.findall(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", text)


@dataclass(frozen=True)
class Build:
    name: str
    source: Path
    library: Path
    archs: tuple[str, ...]
    nvcc_version: str
    command: str             # the nvcc command line, with the cache path shortened
    ptxas_log: str
    resources: list[KernelResources] = field(default_factory=list)
    cached: bool = False
    seconds: float = 0.0     # compile time (0 when the cache answered)

    def resources_for(self, arch: str = "sm_90") -> list[KernelResources]:
        """One architecture's kernels, in source order."""
        order = {k: i for i, k in enumerate(kernel_order(self.source))}
        rows = [r for r in self.resources if r.arch == arch]
        return sorted(rows, key=lambda r: order.get(r.kernel, len(order)))


def build(source: Path, archs: Sequence[str] = ARCHS, *, nvcc: str | None = None,
          force: bool = False) -> Build:
    """Compile a ``.cu`` file into a cached shared library; reuse the cache when nothing changed.

    The library is named after the file (``reduce.cu`` -> ``libreduce.so``); the cache key is a
    hash of the source, the flags and the nvcc version.
    """
    src = Path(source)
    name = src.stem
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise NvccNotFound("nvcc was not found (PATH, CUDA_HOME, /usr/local/cuda); "
                           "install the CUDA toolkit to build the kernels")
    # [nvcc:build]
    version = nvcc_version(nvcc)
    flags = [*NVCC_FLAGS, *gencode_flags(archs)]
    key = hashlib.sha256(src.read_bytes() + "\0".join([*flags, version]).encode()).hexdigest()[:16]
    root = cache_dir()
    folder = root / f"{name}-{key}"  # a new source, flag or compiler means a new folder
    library, log_file = folder / f"lib{name}.so", folder / "ptxas.log"
    shown = f"nvcc {' '.join(flags)} -o lib{name}.so {src.name}"
    if not force and library.is_file() and log_file.is_file():
        log = log_file.read_text(encoding="utf-8")
        return Build(name, src, library, tuple(archs), version, shown, log, parse_ptxas(log), True)
    # [/nvcc:build]
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        start = time.perf_counter()
        proc = subprocess.run([nvcc, *flags, "-o", str(tmp / library.name), str(src)],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            tail = "\n".join(log.strip().splitlines()[-20:])
            raise BuildError(f"nvcc failed on {src.name} (exit {proc.returncode}):\n{tail}")
        (tmp / log_file.name).write_text(log, encoding="utf-8")
        if force and folder.exists():
            shutil.rmtree(folder)
        try:
            os.replace(tmp, folder)  # atomic: a reader sees the whole folder or none of it
        except OSError:  # another process finished the same build first: use theirs
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Build(name, src, library, tuple(archs), version, shown, log, parse_ptxas(log), False, seconds)


def ptx(source: Path, arch: str = "sm_90", *, nvcc: str | None = None) -> str:
    """The PTX nvcc generates for a ``.cu`` file (cached like :func:`build`): what the compiler did
    to the source before ptxas allocated registers."""
    src = Path(source)
    name = src.stem
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise NvccNotFound("nvcc was not found (PATH, CUDA_HOME, /usr/local/cuda)")
    flags = ["-O3", "-std=c++17", "-ptx", f"-arch={arch}"]
    key = hashlib.sha256(src.read_bytes() + "\0".join([*flags, nvcc_version(nvcc)]).encode())
    path = cache_dir() / f"{name}-{key.hexdigest()[:16]}.ptx"
    if not path.is_file():
        tmp = path.with_name(path.name + f".{os.getpid()}.partial")
        proc = subprocess.run([nvcc, *flags, "-o", str(tmp), str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"nvcc -ptx failed on {src.name}:\n{proc.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    return path.read_text(encoding="utf-8")


def ptx_entry(ptx_text: str, kernel: str) -> str:
    """The body of one ``.entry`` of a PTX file (from its ``.entry`` line to its closing brace)."""
    match = re.search(rf"\.entry {re.escape(kernel)}\(.*?\n}}", ptx_text, re.S)
    if not match:
        raise ValueError(f"no .entry {kernel} in this PTX")
    return match.group(0)


def parse_sass_ops(sass: str, kernel: str) -> list[str]:
    """From ``cuobjdump -sass`` text: one kernel's shared and global loads and stores, barriers,
    reductions, atomics, shuffles and branches, in program order (opcode with its modifiers)."""
    match = re.search(rf"Function : {re.escape(kernel)}\n(.*?)(?=\n\s*Function :|\Z)", sass, re.S)
    if not match:
        raise ValueError(f"no function {kernel} in this SASS")
    return re.findall(r"\b(?:LDS|STS|LDG|STG|BAR|RED|ATOM\w*|SHFL)(?:\.\w+)*|\bBRA\b", match.group(1))


def sass(library: Path, arch: str = "sm_90") -> str | None:
    """``cuobjdump -sass`` of a built library for ``arch``, or None where cuobjdump (which needs
    nvdisasm) is not installed or fails."""
    tool = shutil.which("cuobjdump") or next(
        (str(Path(h, "bin", "cuobjdump")) for h in (os.environ.get("CUDA_HOME"), "/usr/local/cuda")
         if h and Path(h, "bin", "cuobjdump").is_file()), None)
    if tool is None:
        return None
    proc = subprocess.run([tool, "-sass", "-arch", arch, str(library)], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def sass_ops(library: Path, kernel: str, arch: str = "sm_90") -> list[str] | None:
    """:func:`parse_sass_ops` of a built library, or None where cuobjdump is not installed."""
    out = sass(library, arch)
    return None if out is None else parse_sass_ops(out, kernel)


def resources_table(build_: Build, arch: str = "sm_90") -> list[dict]:
    """The report of one architecture as rows for a table (source order)."""
    return [{k: v for k, v in asdict(r).items() if k != "arch"} for r in build_.resources_for(arch)]
