"""CTranslate2's instruction set comes from the CPU's flags, so machines of one kind read alike."""

from __future__ import annotations

import subprocess
import sys

from m3cli.stages.core.cpu_isa import cpu_flags, isa_for

SKYLAKE_SP = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl\n"
HASWELL = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\nprocessor\t: 1\nflags\t\t: fpu\n"


def test_the_isa_is_the_best_the_flags_allow():
    assert isa_for(cpu_flags(SKYLAKE_SP)) == "AVX512"
    assert isa_for(cpu_flags(HASWELL)) == "AVX2"  # the first processor's flags
    assert isa_for(cpu_flags("flags\t: fpu sse2 avx avx512f\n")) is None  # AVX-512 without AVX2's FMA
    assert isa_for(frozenset()) is None


def test_a_choice_the_user_made_wins():
    code = (
        "import os\n"
        "from m3cli.stages.core.cpu_isa import pin_ctranslate2_isa\n"
        "print(pin_ctranslate2_isa(), os.environ.get('CT2_FORCE_CPU_ISA'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"CT2_FORCE_CPU_ISA": "GENERIC", "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert out.stdout.split() == ["GENERIC", "GENERIC"], out.stderr
