"""The one CPU detection (``nn.cpu``): flags read from /proc/cpuinfo, and what they allow."""

from __future__ import annotations

from pathlib import Path

from nlu_engine.nn.cpu import Cpu, cpu_flags, detect


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\nflags\t: fpu\n")
    assert cpu_flags(info) == frozenset({"fpu", "avx2", "avx512_vnni"})
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_features_follow_the_flags() -> None:
    sapphire = Cpu(frozenset({"avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"}))
    assert (sapphire.avx512, sapphire.vnni, sapphire.bf16, sapphire.amx) == (True, True, True, True)
    assert sapphire.describe() == "avx512 vnni bf16 amx"
    alder = Cpu(frozenset({"avx2", "avx_vnni"}))
    assert (alder.avx512, alder.vnni, alder.bf16, alder.amx) == (False, True, False, False)
    assert Cpu(frozenset({"avx2"})).describe() == "none"


def test_this_machine_is_detected_once() -> None:
    assert detect() is detect()
    assert detect().flags == cpu_flags()
