"""Media in chat messages: JPEG frames and WAV audio as inline content parts of an OpenAI-style request.

Servers in the sandbox cannot fetch URLs, so pictures and sound travel base64-encoded inside the
message; the client itself never looks at them.
"""

from __future__ import annotations

import base64
from typing import Any


def image_part(jpeg_bytes: bytes) -> dict[str, Any]:
    """A chat content part carrying a JPEG inline (servers in the sandbox cannot fetch URLs)."""
    data = base64.b64encode(jpeg_bytes).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}


def audio_part(wav: bytes) -> dict[str, Any]:
    """A chat content part carrying WAV audio inline, for omni models that listen."""
    data = base64.b64encode(wav).decode("ascii")
    return {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}


def wav_bytes(audio: Any, rate: int) -> bytes:
    """16-bit PCM mono WAV of float samples in [-1, 1] (what ``input_audio`` parts carry)."""
    import io
    import wave

    import numpy as np

    pcm = (np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()
