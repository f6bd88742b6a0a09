"""CAM++ window embeddings: batching many windows at once gives each window its own embedding, the same as
embedding it alone (the diarizer batches 2-s windows for speed; a mix-up of rows would swap speakers)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import DATA


@pytest.fixture(scope="module")
def model_and_audio():
    from m3cli.stages.backends.speaker.campplus import CamppModel
    from m3cli.stages.core.audio_file import read_audio_file

    _, audio = read_audio_file(DATA / "libri5.mp4")
    return CamppModel(), audio


@pytest.mark.slow
def test_batched_windows_equal_one_by_one(model_and_audio) -> None:
    from m3cli.stages.backends.speaker.campplus import BATCH, frame_range, kaldi_fbank

    model, audio = model_and_audio
    # more 2-s windows than one batch holds, with odd-length spans and a too-short one in between
    spans = [(float(s), float(s) + 2.0) for s in range(0, BATCH + 5)]
    spans[3] = (3.0, 4.3)
    spans[7] = (7.0, 7.3)
    batched = model.embed(audio, spans)
    bank = kaldi_fbank(audio)
    alone = np.stack([model.embed_frames(bank[slice(*frame_range(s, e, len(bank)))]) for s, e in spans])
    assert batched.shape == (len(spans), model.dim)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    # each row is its own window's embedding (cosine ~1), not a neighbour's (two windows of one reader
    # 1 s apart already differ by far more than this tolerance)
    assert float(np.min(np.sum(batched * alone, axis=1))) > 0.99999
    assert float(np.max(np.abs(batched - alone))) < 1e-4
    assert float(np.min(np.sum(batched[:-1] * batched[1:], axis=1))) < 0.999
