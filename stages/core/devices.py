"""``--device cuda`` on a machine without a usable GPU fails at once, in one line.

Without this check each backend finds out on its own: dlib quietly runs on the CPU, faster-whisper
fails to load "the model" (and the message points at the model files), torch raises deep inside a
batch. The check asks the CUDA runtimes m3 installs — ctranslate2 (always present, cheap to ask),
then torch if it is installed — how many devices they see. It is only made when a CUDA device was
requested, so CPU runs import nothing for it.
"""

from __future__ import annotations

import importlib.util
import re

from m3cli.stages.core.errors import InputError, M3Error

_CUDA = re.compile(r"cuda(?::(\d+))?")


def cuda_device_count() -> int | None:
    """CUDA devices visible to the installed runtimes (the largest count any of them reports);
    None when no runtime that could tell is installed."""
    counts: list[int] = []
    if importlib.util.find_spec("ctranslate2") is not None:
        try:
            from m3cli.stages.core.cpu_isa import pin_ctranslate2_isa

            pin_ctranslate2_isa()  # before CTranslate2 loads: the kernels its models will run
            import ctranslate2

            counts.append(int(ctranslate2.get_cuda_device_count()))
        except Exception:  # noqa: BLE001 - a broken CUDA runtime counts as "sees none"
            counts.append(0)
    if not any(counts) and importlib.util.find_spec("torch") is not None:
        try:
            from m3cli.stages.core.imports import heavy_import

            torch = heavy_import("torch")  # under the import lock: see m3cli.stages.core.imports

            counts.append(int(torch.cuda.device_count()))
        except Exception:  # noqa: BLE001
            counts.append(0)
    return max(counts) if counts else None


def check_device(device: str | None) -> None:
    """Raise one clear error when ``device`` asks for a CUDA device this machine does not have."""
    if not device or device == "cpu":
        return
    match = _CUDA.fullmatch(device)
    if match is None:
        raise InputError(f"--device {device!r}: use cpu, cuda or cuda:N")
    count = cuda_device_count()
    if count is None:
        return  # nothing here can tell; the backend will say
    index = int(match.group(1) or 0)
    if count == 0:
        raise M3Error(
            f"no CUDA device: --device {device} (from --device, M3_DEVICE or m3.toml) needs an NVIDIA "
            "GPU with its driver, and none is visible here; use --device cpu"
        )
    if index >= count:
        raise M3Error(f"no CUDA device {index}: --device {device}, but only {count} visible (0-{count - 1})")
