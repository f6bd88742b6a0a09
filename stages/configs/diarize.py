"""`m3 diarize`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option


@dataclass(frozen=True)
class ClusterConfig:
    """Embedding-clustering diarization. Defaults measured on the AMI dev excerpts and the fixture."""

    window: float = option(
        2.0, "--cluster-window", help="--diarizer cluster: seconds of audio per speaker embedding."
    )
    hop: float = option(0.5, "--cluster-hop", help="--diarizer cluster: seconds between embedding windows.")
    #: cosine distance at which average-linkage merging stops
    threshold: float = option(
        0.3, "--cluster-threshold", help="Cosine distance at which speaker clusters stop merging."
    )
    min_cluster_seconds: float = 1.0  # smaller clusters are folded into the nearest big one
    min_turn: float = option(
        0.3,
        "--cluster-min-turn",
        help="--diarizer cluster: shorter turns (s) are absorbed by their neighbours.",
    )

    def __post_init__(self) -> None:
        if not (0 < self.hop <= self.window):
            raise InputError(f"window hop must be in (0, window], got hop={self.hop} window={self.window}")
        if not (0 < self.threshold < 2):
            raise InputError(f"clustering threshold is a cosine distance in (0, 2), got {self.threshold}")


@dataclass(frozen=True)
class DiarizeConfig:
    backend: str = option(
        "faster-whisper", "--backend", help="ASR backend: faster-whisper (offline default) or whisperx."
    )
    model: str | None = option(
        None,
        "--model",
        "--asr-model",
        help="ASR model: a CTranslate2 Whisper directory (base.en, small.en, distil, large-v3 on GPU), "
        "base (multilingual Whisper base, installed with the package), a Whisper size (small, medium, "
        "large-v3 ...) placed in $M3_MODEL_DIR/whisper-SIZE or the Hugging Face cache, or a name in that "
        "cache (default: the bundled Whisper tiny.en; nothing is downloaded).",
    )
    language: str | None = option(
        None, "--language", help="Spoken language code (default: the model's, or detected)."
    )
    second_reading: str = option(
        "auto",
        "--second-reading",
        help="Every speaker's language is heard first by multilingual Whisper base; speakers of another "
        "language (probability >= 0.5) are read by base in that language, and tiny.en's text that shows "
        "the marks of invented English is dropped: auto (the default; needs the packaged Whisper base, "
        "part of the install) or off (tiny.en's reading only).",
    )
    translate: bool = option(
        False,
        "--translate/--no-translate",
        help="Speech read in another language also gets Whisper's English translation (``translation`` "
        "beside ``text``); needs the second reading.",
    )
    compute_type: str | None = option(
        None, "--compute-type", help="CTranslate2 compute type (default: int8 on CPU, float16 on CUDA)."
    )
    vad: str = option("silero", "--vad", help="Voice activity detector: silero, faster-whisper or none.")
    diarizer: str | None = option(  # None: "overlap" for faster-whisper, "pyannote" for whisperx
        None,
        "--diarizer",
        help="overlap (segmentation-3.0 + CAM++, overlapped speech; default), cluster (speaker "
        "embeddings over windows, --speaker-backend) or pyannote (default with whisperx).",
    )
    diarizer_model: str | None = option(
        None, "--diarizer-model", help="Local pyannote pipeline directory (with config.yaml)."
    )
    align_model: str | None = option(
        None, "--align-model", help="whisperx alignment model (local wav2vec2 directory or cached name)."
    )
    speaker_backend: str = option(
        "resemblyzer", "--speaker-backend", help="Embedding for --diarizer cluster: resemblyzer or campplus."
    )
    speaker_model: str | None = option(
        None,
        "--speaker-model",
        help="Embedding model file/directory for --diarizer cluster (default: bundled).",
    )
    max_speakers: int | None = option(None, "--max-speakers", help="At most this many speakers per clip.")
    #: known exact number: Ward linkage into that many clusters
    num_speakers: int | None = option(
        None, "--speakers", help="Exactly this many speakers per clip (when known)."
    )
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    def __post_init__(self) -> None:
        if self.max_speakers is not None and self.max_speakers < 1:
            raise InputError(f"--max-speakers must be at least 1, got {self.max_speakers}")
        if self.num_speakers is not None and self.num_speakers < 1:
            raise InputError(f"--speakers must be at least 1, got {self.num_speakers}")
        if self.second_reading not in ("auto", "off"):
            raise InputError(f"--second-reading is auto or off, got {self.second_reading!r}")

    @property
    def diarizer_name(self) -> str:
        """The diarizer used: the one asked for, else the ASR backend's own (its ``default_diarizer``)."""
        if self.diarizer:
            return self.diarizer
        from m3cli.stages.backends.registry import backend_class

        return backend_class("asr", self.backend).default_diarizer

    def key(self) -> dict:
        """The settings a cached per-clip result depends on."""
        data = asdict(self)
        data["diarizer"] = self.diarizer_name
        if data["diarizer"] != "cluster":
            data.pop("cluster")
            data.pop("speaker_backend")
            data.pop("speaker_model")
        return data
