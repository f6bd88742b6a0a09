"""CTranslate2's instruction set comes from the CPU's flags, so machines of one kind read alike."""

from __future__ import annotations

import os
import platform

from m3cli.stages.core.cpu_isa import cpu_flags, isa_for, pin_ctranslate2_isa

SKYLAKE_SP = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl\n"
HASWELL = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\nprocessor\t: 1\nflags\t\t: fpu\n"


def test_the_isa_is_the_best_the_flags_allow():
    assert isa_for(cpu_flags(SKYLAKE_SP)) == "AVX512"
    assert isa_for(cpu_flags(HASWELL)) == "AVX2"  # the first processor's flags
    assert isa_for(cpu_flags("flags\t: fpu sse2 avx avx512f\n")) is None  # AVX-512 without AVX2's FMA
    assert isa_for(frozenset()) is None


def test_a_choice_the_user_made_wins_and_otherwise_the_flags_decide(monkeypatch):
    monkeypatch.setenv("CT2_FORCE_CPU_ISA", "GENERIC")
    assert pin_ctranslate2_isa() == "GENERIC" and os.environ["CT2_FORCE_CPU_ISA"] == "GENERIC"
    monkeypatch.delenv("CT2_FORCE_CPU_ISA")
    chosen = pin_ctranslate2_isa()
    if platform.system() == "Linux" and platform.machine() == "x86_64":
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            assert chosen == isa_for(cpu_flags(fh.read()))
    assert os.environ.get("CT2_FORCE_CPU_ISA") == chosen
