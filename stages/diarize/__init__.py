"""`m3 diarize`, the stage that turns a clip's sound into words with times and speakers.

Parts: :mod:`~m3cli.stages.diarize.stage` (the command's entry: the models, speaker turns, the per-clip
pipeline and the records), :mod:`~m3cli.stages.diarize.transcribe` (the ASR's reading of the speech,
times mapped back onto the clip), :mod:`~m3cli.stages.diarize.utterances` (words fitted to speaker
turns: one speaker per utterance, times from the turns),
:mod:`~m3cli.stages.diarize.language_id` (each speaker's language, asked before any words are read),
:mod:`~m3cli.stages.diarize.second` (the multilingual second reading) and
:mod:`~m3cli.stages.diarize.asr_guards` (dropping words the English model invented).
"""
