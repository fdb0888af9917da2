"""What this CPU can do for the parse runtimes, read once from ``/proc/cpuinfo``.

The one place the package looks at the processor: the int8 runtime is fast only with int8 dot
products (VNNI, AMX), and fine-tuning's bfloat16 products only with bfloat16 matrix
instructions (AVX-512 BF16, AMX). Where ``/proc/cpuinfo`` is missing (not Linux) nothing is
detected, and the float32 paths run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
#: flags of an int8 dot-product instruction ONNX Runtime's quantised kernels use
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
#: flags of bfloat16 matrix instructions oneDNN uses
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16"})


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The first processor's feature flags (empty where the file is missing or unreadable)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@dataclass(frozen=True)
class Cpu:
    """The features of a CPU that choose or speed up a runtime."""

    flags: frozenset[str]

    @property
    def avx2(self) -> bool:
        return "avx2" in self.flags

    def slow_path(self) -> str | None:
        """What parses slowly on an x86-64 CPU without AVX2 (a plain x86-64 container), in one
        line; None on any other CPU, or where nothing was detected."""
        if "sse2" not in self.flags or self.avx2:
            return None
        return ("this CPU has no AVX2: ONNX Runtime parses on its SSE kernels, several times "
                "slower than on an AVX2 CPU (BENCHMARKS.md); training needs TensorFlow's AVX "
                "build")

    @property
    def avx512(self) -> bool:
        return "avx512f" in self.flags

    @property
    def vnni(self) -> bool:
        """int8 dot products (AVX-512 VNNI, AVX-VNNI or AMX-INT8): what makes int8 fast."""
        return bool(self.flags & INT8_FLAGS)

    @property
    def bf16(self) -> bool:
        """bfloat16 matrix instructions (AVX-512 BF16 or AMX-BF16)."""
        return bool(self.flags & BFLOAT16_FLAGS)

    @property
    def amx(self) -> bool:
        return bool(self.flags & AMX_FLAGS)

    def describe(self) -> str:
        """The features found, for a status line: e.g. ``avx512 vnni bf16 amx`` (or ``none``)."""
        found = [name for name in ("avx512", "vnni", "bf16", "amx") if getattr(self, name)]
        return " ".join(found) or "none"


@cache
def detect() -> Cpu:
    """This machine's CPU (read once per process)."""
    return Cpu(cpu_flags())
