"""CTranslate2's CPU instruction set, chosen from what the CPU can do rather than from its name.

Why: CTranslate2 picks its int8 kernels (AVX-512, AVX2, ...) by its own reading of the processor, and
the two kernels round differently: Whisper's greedy reading of a borderline window, and the temperature
fallback that follows, then differ. On one AVX-512 machine whose processor reports only a generic
model name, CTranslate2 chose AVX2 where another AVX-512 machine had run AVX-512, and tiny.en read a
Portuguese speaker's 17 s as other English (a log-probability of -0.96 instead of under -1): the same
m3, the same files, another memory. Choosing the kernels from the CPU's flags makes every machine of
one capability read alike, and on the machine measured AVX-512 was not slower (tiny.en over jfk.wav,
one thread: 1.13-1.18 CPU-s against 1.20-1.22 for AVX2).

The flags are the kernel's (``/proc/cpuinfo``), which it lists only where the operating system saves
the registers they need. ``CT2_FORCE_CPU_ISA`` set by the user wins; elsewhere than x86-64 Linux
nothing is set.
"""

from __future__ import annotations

import os
import platform

#: CTranslate2's AVX-512 kernels need these (Skylake-SP and later)
AVX512 = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"})
AVX2 = frozenset({"avx2", "fma"})


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The first processor's flags in a ``/proc/cpuinfo`` text."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def isa_for(flags: frozenset[str]) -> str | None:
    """The CTranslate2 instruction set for a CPU with these flags (None: leave it to CTranslate2)."""
    if AVX512 <= flags:
        return "AVX512"
    if AVX2 <= flags:
        return "AVX2"
    return None


def pin_ctranslate2_isa() -> str | None:
    """Set ``CT2_FORCE_CPU_ISA`` from the CPU's flags unless it is set; call before CTranslate2 is
    imported. Returns the instruction set in force (None where CTranslate2 chooses)."""
    if "CT2_FORCE_CPU_ISA" in os.environ:
        return os.environ["CT2_FORCE_CPU_ISA"] or None
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            isa = isa_for(cpu_flags(fh.read()))
    except OSError:
        return None
    if isa is not None:
        os.environ["CT2_FORCE_CPU_ISA"] = isa
    return isa
