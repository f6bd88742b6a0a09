"""One backend table (stages/backends/registry.py): every name resolves to a class that states its own
name, and the speech backends their cache identity and record name, without loading a model."""

from __future__ import annotations

import pytest

from m3cli.stages.backends.registry import BACKENDS, backend_class, backend_names
from m3cli.stages.core.errors import M3Error


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, table in BACKENDS.items() for n in table])
def test_every_backend_resolves_and_states_its_name(kind, name):
    cls = backend_class(kind, name)
    if BACKENDS[kind][name] is None:
        assert cls is None  # served by the stage itself (vad none, diarizer cluster)
        return
    assert isinstance(cls, type)
    if kind != "embed":  # text embedders state a model version instead (Embedder.version)
        assert cls.name == name
    if kind in ("asr", "speaker"):
        assert callable(cls.identity) and callable(cls.display_name)


@pytest.mark.parametrize("kind", list(BACKENDS))
def test_an_unknown_backend_is_one_error_listing_the_valid_ones(kind):
    valid = ", ".join(sorted(backend_names(kind)))
    with pytest.raises(M3Error, match=rf"unknown .* 'nope'; valid: {valid}$"):
        backend_class(kind, "nope")


def test_speaker_backends_name_their_models_without_loading_them(tmp_path):
    weights = tmp_path / "mine.pt"
    assert backend_class("speaker", "campplus").display_name(None) == "campplus-192"
    assert backend_class("speaker", "resemblyzer").display_name(str(weights)) == "mine.pt"
    assert backend_class("speaker", "pyannote").display_name(None) == "-"
    assert "weights missing" in backend_class("speaker", "campplus").identity(str(weights), "cpu")
    assert backend_class("asr", "whisperx").display_name(None) == "large-v3"
    assert backend_class("asr", "faster-whisper").display_name(None) == "tiny.en"
