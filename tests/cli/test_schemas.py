"""The published JSON Schemas and the typed records must describe the same records."""

from __future__ import annotations

import jsonschema
import orjson
import pytest
from pydantic import BaseModel, ValidationError

from conftest import FIXTURE, run_m3
from m3cli.schemas import SCHEMA_FILES, load_schema
from m3cli.schemas import records as R
from m3cli.stages.core.errors import M3Error
from support.strict_records import undeclared_fields

# (record type, JSON pointer into its schema) -> the pydantic model mirroring that object
MIRRORS: dict[tuple[str, str], type[BaseModel]] = {
    ("m3.answer/1", ""): R.AnswerRecord,
    ("m3.answer/1", "/properties/evidence/items"): R.AnswerEvidence,
    ("m3.answer/1", "/properties/trajectory/items"): R.AnswerRound,
    ("m3.answer/1", "/properties/tokens"): R.AnswerTokens,
}
MIRRORS |= {
    ("m3.clip/1", pointer): model
    for pointer, model in {
        "": R.ClipRecord,
        "/properties/video": R.VideoInfo,
        "/properties/clip": R.ClipInfo,
        "/properties/faces": R.FacesSection,
        "/$defs/faceTrack": R.FaceTrack,
        "/properties/asr": R.AsrSection,
        "/properties/sight": R.SightSection,
        "/properties/sight/properties/keyframes/items": R.Keyframe,
        "/properties/sight/properties/text/items": R.SightText,
        "/properties/sight/properties/tags/items": R.SightTag,
        "/$defs/utterance": R.Utterance,
        "/$defs/word": R.Word,
        "/$defs/turn": R.Turn,
        "/properties/voices": R.VoicesSection,
        "/properties/memory": R.MemorySection,
        "/$defs/memoryItem": R.MemoryItem,
        "/properties/link": R.LinkSection,
        "/$defs/vote": R.Vote,
        "/$defs/voice_split": R.VoiceSplit,
        "/$defs/abstraction": R.Abstraction,
        "/$defs/problem": R.Problem,
    }.items()
}


def resolve(schema: dict, pointer: str) -> dict:
    node = schema
    for part in [p for p in pointer.split("/") if p]:
        node = node[part]
    return node


@pytest.mark.parametrize("name,pointer", sorted(MIRRORS))
def test_models_mirror_the_json_schema(name, pointer):
    node = resolve(load_schema(name), pointer)
    model = MIRRORS[name, pointer]
    fields = {f.alias or name for name, f in model.model_fields.items()}
    required = {f.alias or name for name, f in model.model_fields.items() if f.is_required()}
    assert fields == set(node["properties"]), pointer
    assert required == set(node.get("required", [])), pointer


def test_one_id_convention():
    """Every schema's $id is the record type name its records carry in their ``schema`` field."""
    for name in SCHEMA_FILES:
        schema = load_schema(name)
        assert schema["$id"] == name
        assert schema["properties"]["schema"] == {"const": name}


def test_every_schema_is_valid_and_printable():
    for name in SCHEMA_FILES:
        jsonschema.Draft202012Validator.check_schema(load_schema(name))
    out = run_m3("schema", check=True).stdout
    assert orjson.loads(out)["$id"] == "m3.clip/1"
    assert run_m3("schema", "--list", check=True).stdout.decode().split() == sorted(SCHEMA_FILES)
    proc = run_m3("schema", "m3.nope/1")
    assert proc.returncode == 1 and b"unknown schema 'm3.nope/1'" in proc.stderr
    with pytest.raises(M3Error):
        load_schema("m3.nope/1")


def _valid_record() -> dict:
    return {
        "schema": "m3.clip/1",
        "video": {"id": "0123456789abcdef", "path": "/v.mp4", "duration": 60.0},
        "clip": {"index": 1, "start": 30.0, "end": 60.0},
        "faces": {
            "backend": "dlib",
            "tracks": [
                {
                    "face_id": "<face_1>",
                    "detections": 3,
                    "spans": [[31.0, 32.5]],
                    "boxes": [[31.0, 1, 2, 30, 40]],
                    "quality": 0.8,
                }
            ],
        },
        "utterances": [
            {
                "start": 31.0,
                "end": 33.0,
                "text": "hi",
                "speaker": "<voice_2>",
                "words": [{"start": 31.0, "end": 31.4, "word": "hi", "p": 0.9}],
            }
        ],
        "memory": {
            "source": "offline",
            "episodic": [{"text": '<voice_2> says: "hi"', "entities": ["<voice_2>"]}],
            "semantic": [],
            "equivalences": [["<face_1>", "<voice_2>"]],
        },
        "characters": {"<face_1>": "<character_1>"},
    }


BREAKAGES = [
    ("video.id", lambda r: r["video"].__setitem__("id", "XYZ")),
    ("clip.index", lambda r: r["clip"].__setitem__("index", -1)),
    ("face_id", lambda r: r["faces"]["tracks"][0].__setitem__("face_id", "face one")),
    ("speaker", lambda r: r["utterances"][0].__setitem__("speaker", "bob")),
    ("memory.source", lambda r: r["memory"].__setitem__("source", "dream")),
    ("memory text", lambda r: r["memory"]["episodic"][0].__setitem__("text", "")),
    ("tracks", lambda r: r["faces"].pop("tracks")),
]


def test_both_accept_a_full_record_with_extras():
    rec = _valid_record()
    rec["extra_section"] = {"anything": [1, 2]}
    jsonschema.validate(rec, load_schema())
    assert R.ClipRecord.model_validate(rec).to_json() == rec


def test_undeclared_fields_are_named_by_both_the_schema_and_the_models():
    """What the end-to-end runs check their records with (support.strict_records)."""
    rec = _valid_record()
    rec["asr"] = {"backend": "faster-whisper", "vad": "silero", "diarizer": "overlap"}
    rec["voices"] = {"backend": "campplus", "threshold": 0.5}
    assert undeclared_fields(rec) == []
    rec["voices"]["cutoff"] = 0.5
    rec["faces"]["tracks"][0]["blur"] = 0.1
    found = undeclared_fields(rec)
    assert any(f.startswith("schema .voices:") and "'cutoff'" in f for f in found)
    assert any(f.startswith("schema .faces.tracks[0]:") and "'blur'" in f for f in found)
    assert {"model .voices.cutoff", "model .faces.tracks[].blur"} <= set(found)


@pytest.mark.parametrize("what,breaker", BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_both_reject_the_same_mistakes(what, breaker):
    rec = _valid_record()
    breaker(rec)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(rec, load_schema())
    with pytest.raises(ValidationError):
        R.ClipRecord.model_validate(rec)


def test_segment_output_satisfies_the_schema(cache_dir):
    for line in run_m3("segment", FIXTURE, check=True).stdout.splitlines():
        jsonschema.validate(orjson.loads(line), load_schema())
