"""On-screen text offline: RapidOCR (PP-OCRv6 detection + recognition, ONNX models inside the wheel).

Why RapidOCR: ``rapidocr`` 3.x installs with its detection, recognition and direction-classifier ONNX
models in the wheel (Apache-2.0 code and models) and runs them on onnxruntime, so nothing is fetched at
run time. Detection runs on the whole frame; recognition runs only on the boxes detection found, so a
frame without text costs one detection pass. The 180-degree direction classifier is off: on-screen and
scene text in video is upright, and it costs a pass per box.

``det_side`` bounds the detector's input: the longer side of the frame is scaled to at most this many
pixels (the library's own default instead scales the *shorter* side up to 736, about 1.4x the pixels
of a 720p frame). Text a reader can see in a video frame survives 960 px.

``charset``: "ascii" (the default) decodes the recogniser's output over printable ASCII and puts back
word spaces it hinted at (:mod:`ocr_decode`); "all" decodes its whole Chinese+English alphabet.

``gate_side``: most keyframes of most videos show no text, so detection first runs on the frame scaled
to this smaller side (about a fifth of the cost at 960 px), and the boxes it finds are recognised (from
the full frame; a few ms a box). Only a frame where that first pass read a line the caller would keep
(``keep``: the stage's own confidence and length filter) is detected again at ``det_side`` and read
in full: at 480 px the detector merges close words and loses small lines, but it finds *some* line
of nearly every frame that has text. On talking-head footage the boxes the gate finds are mostly
texture or a small logo read below the confidence filter, and the second detection (~0.1 s at 854
px) was most of sight's cost. 0 turns the gate off.

Start-up: importing ``rapidocr`` parses its model table (``default_models.yaml``, 1,600 lines) twice
into OmegaConf objects at module level, about half a CPU second per process, which every `m3 sight`
paid before reading a frame. :func:`_import_engine` keeps the parsed table pickled in the model store
(:func:`onnx_export.model_store`, beside the exported networks, named by a digest of the file's bytes
and the rapidocr and omegaconf versions) and hands that to the import instead of parsing it again
(a few ms); the library reads the table only, as before.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import logging
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from m3cli.stages.backends.ocr import TextBox
from m3cli.stages.backends.ocr.lines import VERSION as LINES_VERSION
from m3cli.stages.backends.ocr.lines import is_upright, read_as_lines
from m3cli.stages.core.errors import M3Error

if TYPE_CHECKING:  # RapidOCR.__call__ returns a union over its modes: this names the full read's
    from rapidocr.utils.output import RapidOCROutput

log = logging.getLogger(__name__)

NAME = "rapidocr"
CHARSETS = ("ascii", "all")
GATE_REC_WIDTH = 96  # the first pass's recogniser input: at least this wide, else the box's own width
DECODER = "ctc2"  # ocr_decode's version: part of the backend version, so cached sight sections renew


def _model_paths() -> dict[str, str]:
    """The detection and recognition networks' verified paths, as the library's parameters."""
    from m3cli.stages.backends import models

    def packaged(name: str) -> Callable[[], Path]:
        def locate() -> Path:
            spec = importlib.util.find_spec("rapidocr")
            if spec is None or not spec.origin:
                raise M3Error("sight's text reader needs `pip install rapidocr` (models ship in the wheel)")
            return Path(spec.origin).resolve().parent / "models" / name

        return locate

    det, rec = (f.name for f in models.model("pp-ocrv6-small").files)
    return {
        "Det.model_path": str(models.resolved("pp-ocrv6-small", det, packaged(det))),
        "Rec.model_path": str(models.resolved("pp-ocrv6-small", rec, packaged(rec))),
    }


def _installed_version() -> str:
    from importlib.metadata import version

    return version("rapidocr")


class RapidOcr:
    """Text lines of RGB frames."""

    name = NAME

    def __init__(
        self,
        det_side: int = 960,
        gate_side: int = 480,
        threads: int | None = None,
        charset: str = "ascii",
    ) -> None:
        if charset not in CHARSETS:
            raise M3Error(f"sight text charset must be one of {', '.join(CHARSETS)}, got {charset!r}")
        RapidOCR = _import_engine()
        from m3cli.stages.core.threads import count

        params = {
            "Global.log_level": "error",
            "Global.use_cls": False,
            "Det.limit_side_len": int(det_side),
            "Det.limit_type": "max",
            "EngineConfig.onnxruntime.intra_op_num_threads": int(threads or count("onnxruntime")),
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            # no memory arena (as every session of m3's, stages/core/threads.py): each text line's width
            # grew it for good, and a long video's peak with it. The cost: the reader's CPU +14% on
            # frames full of text (BBB's title), none on footage with little (docs/scale-length.md)
            "EngineConfig.onnxruntime.enable_cpu_mem_arena": False,
            # the wheel's networks (or $M3_MODEL_DIR's copies), checked against m3's pinned SHA-256s:
            # left to itself the library would fetch a file whose digest differs from its table's
            **_model_paths(),
        }
        self.det_side = int(det_side)
        self.gate_side = int(gate_side) if 0 < gate_side < det_side else 0
        self.charset = charset
        self.version = f"{NAME}-{_installed_version()}" + f"-{charset}-{DECODER}-{LINES_VERSION}"
        self.model = "PP-OCRv6 det/rec small"
        self._engine = RapidOCR(params=params)
        self._gate = (
            RapidOCR(params={**params, "Det.limit_side_len": self.gate_side}) if self.gate_side else None
        )
        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        _own_decoder(self._engine, restrict=charset == "ascii")
        if self._gate is not None:
            # one recogniser network and decoder for both passes; the first pass's boxes are not
            # padded to the library's 320 px minimum width (its lines only decide whether to read the
            # frame in full), so a small box costs a third of a padded one
            rec = copy.copy(self._engine.text_rec)
            rec.rec_image_shape = [*list(rec.rec_image_shape)[:2], GATE_REC_WIDTH]
            self._gate.text_rec = rec

    def read(self, image: np.ndarray, keep: Callable[[str, float], bool] | None = None) -> list[TextBox]:
        """Every text line found in one RGB frame (detection, then recognition on the found boxes).
        With ``keep`` (text, confidence -> whether the caller keeps the line), a frame whose first,
        small pass reads no line worth keeping is not read in full."""
        bgr = np.ascontiguousarray(np.asarray(image, dtype=np.uint8)[:, :, ::-1])
        if self._gate is not None:
            found = self._gate(bgr, use_det=True, use_cls=False, use_rec=keep is not None)
            boxes = getattr(found, "boxes", None)
            if boxes is None or len(boxes) == 0:
                return []
            if keep is not None:  # a recognised first pass: its lines, as the caller would filter them
                texts, scores = getattr(found, "txts", None) or (), getattr(found, "scores", None) or ()
                first = [(str(t).strip(), float(c)) for t, c in zip(texts, scores, strict=False)]
                if not any(keep(t, c) for t, c in first):
                    read = self._as_lines(
                        bgr, first, boxes[: len(first)]
                    )  # a box of several lines, read as its lines
                    if not any(keep(x.text, x.score) for lines in read if len(lines) > 1 for x in lines):
                        return []
        result = cast("RapidOCROutput", self._engine(bgr, use_det=True, use_cls=False, use_rec=True))
        if result is None or result.txts is None or result.scores is None or result.boxes is None:
            return []
        readings = [(str(t).strip(), float(c)) for t, c in zip(result.txts, result.scores, strict=True)]
        return [x for lines in self._as_lines(bgr, readings, result.boxes) for x in lines]

    def _as_lines(
        self, bgr: np.ndarray, readings: list[tuple[str, float]], quads: Any
    ) -> list[list[TextBox]]:
        """Each detector box's reading as the lines it holds (:mod:`~.lines`: a box of several lines
        is cut and read again)."""
        found = []
        for (text, score), quad in zip(readings, quads, strict=True):
            q = np.asarray(quad, dtype=np.float64)
            corners = (q[:, 0].min(), q[:, 1].min(), q[:, 0].max(), q[:, 1].max())
            x0, y0, x1, y1 = (round(float(v), 1) for v in corners)
            found.append((TextBox(text, score, (x0, y0, x1, y1)), is_upright(q)))
        return read_as_lines(bgr, found, self._recognise)

    def _recognise(self, crops: list[np.ndarray]) -> tuple[list[str], list[float]]:
        """Texts and confidences of upright BGR crops, by the full reader's recogniser and decoder."""
        from rapidocr.ch_ppocr_rec.typings import TextRecInput

        found = self._engine.text_rec(TextRecInput(img=crops))
        return [str(t) for t in found.txts or ()], [float(c) for c in found.scores or ()]


def _import_engine():
    """``rapidocr.RapidOCR``, imported with its model table parsed once per installed version (the
    module docstring says why); any trouble with the stored copy falls back to the library's own
    parsing, and the copy is written again."""
    try:
        import rapidocr
    except ImportError:
        raise M3Error("sight's text reader needs `pip install rapidocr` (models ship in the wheel)") from None
    if "rapidocr.main" in sys.modules:  # imported already in this process
        from rapidocr import RapidOCR

        return RapidOCR
    from omegaconf import OmegaConf

    table = Path(rapidocr.__file__).resolve().parent / "default_models.yaml"
    parsed = _parsed_table(table, OmegaConf)
    if parsed is None:
        from rapidocr import RapidOCR

        return RapidOCR
    original = OmegaConf.__dict__["load"]

    def load(file_, *args, **kwargs):
        if isinstance(file_, (str, Path)) and Path(file_).resolve() == table:
            return pickle.loads(parsed)  # a fresh object for each of the library's two readers
        return original.__func__(file_, *args, **kwargs)

    OmegaConf.load = staticmethod(load)
    try:
        from rapidocr import RapidOCR
    finally:
        OmegaConf.load = original
    return RapidOCR


def parsed_table_path(data: bytes | None = None) -> Path:
    """The model store file of the parsed model table whose bytes are ``data`` (by default the installed
    rapidocr's ``default_models.yaml``): named by those bytes and the rapidocr and omegaconf versions."""
    from importlib.metadata import version

    from m3cli.stages.core import model_store

    if data is None:
        spec = importlib.util.find_spec("rapidocr")
        if spec is None or not spec.origin:
            raise M3Error("sight's text reader needs `pip install rapidocr` (models ship in the wheel)")
        data = (Path(spec.origin).resolve().parent / "default_models.yaml").read_bytes()
    identity = f"{_installed_version()}\n{version('omegaconf')}\n{hashlib.sha256(data).hexdigest()}"
    return model_store.root() / f"rapidocr-models-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.pickle"


def _parsed_table(table: Path, omegaconf: Any) -> bytes | None:
    """The pickled OmegaConf object of ``table`` from the model store, made and stored the first time
    (None when the table cannot be read: the library then reports it as it would)."""
    from m3cli.stages.core.storage import write_atomic

    try:
        data = table.read_bytes()
    except OSError:
        return None
    stored = parsed_table_path(data)
    try:
        blob = stored.read_bytes()
        pickle.loads(blob)  # a copy cut short by a full disk is rebuilt, not handed to the library
        return blob
    except Exception:  # missing, or unreadable: parsed again below
        pass
    blob = pickle.dumps(omegaconf.load(table), protocol=pickle.HIGHEST_PROTOCOL)
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(stored, blob)
    except OSError as exc:
        log.debug("rapidocr model table not stored in %s: %s", stored.parent, exc.strerror)
    return blob


def _own_decoder(engine, restrict: bool) -> None:
    """Replace the engine's recogniser decoder with :class:`ocr_decode.CtcDecode`."""
    from m3cli.stages.backends.ocr.decode import CtcDecode

    load = getattr(engine, "_load_rec_model", None)
    rec = load() if load is not None else getattr(engine, "text_rec", None)
    decode = getattr(rec, "postprocess_op", None)
    if rec is None or decode is None or not hasattr(decode, "character"):
        raise M3Error(
            f"rapidocr {_installed_version()}: its recogniser exposes no CTC decoder; install rapidocr 3.x"
        )
    rec.postprocess_op = CtcDecode(decode.character, restrict=restrict)
