"""One module per command (``register(app)``), imported only when the command is used.

``COMMANDS`` names each command's module and one-line summary (the first line of its help) in the
order ``m3 --help`` lists them, so listing commands imports none of them; tests/cli/test_startup.py checks
the summaries against the commands themselves. A module left out of the table still works, imported
at every start.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "segment": (
        "segment_cmd",
        "Cut videos into fixed-length clips: one m3.clip/1 record per clip on stdout.",
    ),
    "diarize": (
        "diarize_cmd",
        "Transcribe each clip with word timestamps and split it into single-speaker utterances.",
    ),
    "voices": (
        "voices_cmd",
        "Give utterances global voice ids <voice_N> by matching speaker embeddings to a per-video "
        "voice bank.",
    ),
    "faces": (
        "faces_cmd",
        "Detect, cluster and identify faces: add global <face_N> tracks to each clip record.",
    ),
    "sight": (
        "sight_cmd",
        "Keyframes, on-screen text and object/scene tags per clip (offline OCR and ImageNet tags).",
    ),
    "memorize": (
        "memorize_cmd",
        "Write episodic and semantic memory per clip (LLM if configured, else the offline memorizer).",
    ),
    "link": (
        "link_cmd",
        "Link faces and voices into <character_k> ids by voting over the whole video.",
    ),
    "abstract": (
        "abstract_cmd",
        "Summarise characters, relationships, clips and the video; link related facts.",
    ),
    "index": (
        "index_cmd",
        "Write memory records into a LanceDB dataset (nodes, edges, entities, clips); appends are "
        "idempotent.",
    ),
    "run": (
        "run_cmd",
        "Run the whole pipeline in one process: models load once, each video is finished before the next.",
    ),
    "batch": (
        "batch_cmd",
        "Index many videos into one memory: parallel workers, one writer, resumable, failures reported.",
    ),
    "watch": (
        "watch_cmd",
        "Build a memory while a stream, a growing file or a drop folder is recorded, one clip at a time.",
    ),
    "ask": (
        "ask_cmd",
        "Answer questions from a memory: multi-round search with cited evidence (retrieval-only "
        "without LLM).",
    ),
    "people": (
        "people_cmd",
        "List the memory's people across its videos; show one, name, merge or split them.",
    ),
    "report": (
        "report_cmd",
        "Write one offline HTML page of a memory: timeline, character cards, answers, search, graphs.",
    ),
    "eval": (
        "evaluate_cmd",
        "Score perception and answers against ground truth (faces, diarization, ASR, M3-Bench QA).",
    ),
    "validate": (
        "validate_cmd",
        "Check clip records against the schema; report `file:line: reason` for the first bad one.",
    ),
    "schema": (
        "schema_cmd",
        "Print the JSON Schema of a record type.",
    ),
    "memory": (
        "memory_cmd",
        "Show how a memory is stored (tables, fragments, versions, disk) and compact it.",
    ),
    "cache": (
        "cache_cmd",
        "Inspect and trim the on-disk cache of per-clip work.",
    ),
    "models": (
        "models_cmd",
        "List the models m3 can use, verify their files, export them, prepare them once.",
    ),
    "config": (
        "config_cmd",
        "Show the effective configuration (flags > M3_* environment > m3.toml > defaults).",
    ),
}
