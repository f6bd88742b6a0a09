"""Small torch networks run by onnxruntime on CPU: exported once per weights file, then loaded without torch.

Why: the speaker stack's two torch networks (segmentation-3.0 and CAM++) made every `m3 diarize` and
`m3 voices` process import torch (~1.2 s wall, ~220 MB) to run a few milliseconds of network per window,
and onnxruntime runs CAM++ 1.6-2x faster than torch on one core (segmentation about the same), with
outputs equal to ~1e-5. The first use on a machine exports the network with torch's TorchScript-based
exporter (a second or two) into the model store; every later process loads the ``.onnx`` file in ~0.1 s
and never imports torch. GPU runs (``--device cuda``) keep the torch modules.

The model store (:mod:`~m3cli.stages.core.model_store`) is ``$M3_MODEL_STORE`` or ``models/`` under the
platform cache directory. It is kept apart from the stage cache (``--cache-dir``/``$M3_CACHE``), which is
per project and pruned by size, while an export depends only on the installed weights. A file's name
carries a digest of the weights' *content* (SHA-256, remembered per file identity so it is computed
once), the torch version and the export recipe: a second virtualenv or a reinstall of the same wheel
finds the same file, and replaced or upgraded weights are exported afresh, never mixed with an old
export. Exporting is safe from several threads (torch's exporter is process-global, so one export runs
at a time in a process) and from several processes sharing the store (a file lock, then an atomic
rename; a waiter loads the file the first process finished). One that onnxruntime cannot load is
exported again. Where the store cannot be written (a read-only home), the export is used from memory
for the process and the reason logged once.
"""

from __future__ import annotations

import io
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m3cli.stages.core import model_store as store
from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.once import MadeOnce

log = logging.getLogger(__name__)

OPSET = 17


@dataclass(frozen=True)
class OnnxExport:
    """How to export one network.

    ``build(torch)`` returns the module (eval mode), example inputs, and metadata (str -> str) to keep in
    the file, which a session reads back with ``metadata(session)`` (e.g. a checkpoint's configuration
    that would otherwise need torch to unpickle).
    """

    name: str
    recipe: str  # bump when the module definition or export settings change: forces a new export
    weights: Path
    build: Callable[[Any], tuple[Any, tuple[Any, ...], dict[str, str]]]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)


RUNTIMES = ("onnxruntime", "torch")


def default_runtime(device: str) -> str:
    """onnxruntime on the CPU, torch on an accelerator (the exports are CPU sessions)."""
    return "onnxruntime" if device == "cpu" else "torch"


def resolve_runtime(name: str, device: str, runtime: str | None) -> str:
    """The runtime a network named ``name`` runs on: ``runtime``, else the device's default; checked."""
    chosen = runtime or default_runtime(device)
    if chosen not in RUNTIMES:
        raise M3Error(f"{name}: unknown runtime {chosen!r}; valid: {', '.join(RUNTIMES)}")
    if chosen == "onnxruntime" and device != "cpu":
        raise M3Error(f"{name}: the onnxruntime export runs on the CPU only, not {device!r}")
    return chosen


def model_store() -> Path:
    """Where exported networks are kept (``$M3_MODEL_STORE`` or the platform cache's ``models/``)."""
    return store.root()


def export_path(spec: OnnxExport, torch_version: str | None = None) -> Path:
    """The store file for ``spec``: its digest names the weights' content, torch and the recipe."""
    try:
        content = store.file_digest(spec.weights)
    except OSError as exc:
        raise M3Error(f"{spec.weights}: cannot read the {spec.name} weights: {exc.strerror}") from None
    version = torch_version or _installed_version("torch")
    return store.root() / f"{spec.name}-{store.digest_of(content, version, spec.recipe, str(OPSET))}.onnx"


def _installed_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        raise M3Error(
            f"torch is not installed: it is needed once to export the bundled networks to ONNX "
            f"(`pip install torch`); {dist} missing"
        ) from None


#: torch's exporter keeps process-global state (``GLOBALS.in_onnx_export``): two exports in two threads
#: (`m3 run`'s voices and sight branches on an empty store) fail with an AssertionError. One at a time.
_EXPORTER = threading.Lock()


def _export(spec: OnnxExport) -> bytes:
    """The ONNX bytes of ``spec``'s network (imports torch; the only place that does on CPU)."""
    from m3cli.stages.core.imports import imports_held

    # torch and what the network is built from are imported while the other branch's scipy waits
    # (m3cli.stages.core.imports says why); only a first run on an empty model store exports
    with imports_held():
        return _export_held(spec)


def _export_held(spec: OnnxExport) -> bytes:
    from m3cli.stages.core.imports import heavy_import
    from m3cli.stages.core.threads import apply_torch

    torch = heavy_import("torch")
    apply_torch(torch)
    module, example, metadata = spec.build(torch)
    buf = io.BytesIO()
    with _EXPORTER, warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        try:
            torch.onnx.export(
                module,
                example,
                buf,  # torch annotates a path; this exporter writes file objects too
                dynamo=False,
                input_names=list(spec.inputs),
                output_names=list(spec.outputs),
                dynamic_axes=spec.dynamic_axes,
                opset_version=OPSET,
            )
        except ImportError as exc:  # torch's exporter needs the onnx package
            raise M3Error(f"exporting {spec.name} to ONNX needs `pip install onnx` ({exc})") from None
    if not metadata:
        return buf.getvalue()
    import onnx

    model = onnx.load_from_string(buf.getvalue())
    for key, value in sorted(metadata.items()):
        model.metadata_props.add(key=key, value=value)
    return model.SerializeToString()


def metadata(session: Any) -> dict[str, str]:
    """The metadata an export stored (``OnnxExport.build``'s third value)."""
    return dict(session.get_modelmeta().custom_metadata_map)


def cpu_session(spec: OnnxExport) -> Any:
    """An onnxruntime session of ``spec``'s network, exported into the model store on first use.

    One session per export and process: diarize's and voices' CAM++ in one `m3 run` share it (an
    onnxruntime session runs calls from several threads at once)."""
    path = export_path(spec)
    session = _SESSIONS.get(path, lambda: _open_session(spec, path))
    inputs = tuple(i.name for i in session.get_inputs())
    outputs = tuple(o.name for o in session.get_outputs())
    if inputs != spec.inputs or outputs != spec.outputs:  # a valid ONNX of another network
        raise foreign_export(spec)
    return session


def foreign_export(spec: OnnxExport) -> M3Error:
    """The one line for a store file that loads but is not ``spec``'s network (a file copied or renamed
    in the model store): it would otherwise fail deep inside with a missing input or ``KeyError``."""
    return M3Error(
        f"{export_path(spec)}: not a {spec.name} export (another network's file under its name in the "
        "model store); delete it and it is exported again on the next run"
    )


_SESSIONS: MadeOnce[Any] = MadeOnce()


def _open_session(spec: OnnxExport, path: Path) -> Any:
    import onnxruntime as ort

    from m3cli.stages.core.threads import onnx_session_options

    options = onnx_session_options(ort)

    def load(source: Path | bytes) -> Any:
        model = str(source) if isinstance(source, Path) else source
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    return store.kept(path, lambda: _export(spec), load, f"{spec.name} export")
