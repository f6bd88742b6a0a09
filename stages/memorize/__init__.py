"""`m3 memorize`, the stage that writes each clip's episodic and semantic memory lines.

Parts: :mod:`~m3cli.stages.memorize.stage` (the command's entry: per clip, the offline memorizer or the
LLM, whose replies are cached per request and which falls back to the offline memorizer),
:mod:`~m3cli.stages.memorize.offline` (the offline memorizer: one function per line kind),
:mod:`~m3cli.stages.memorize.request` (what the LLM is sent: frames, crops, audio, dialogue) and
:mod:`~m3cli.stages.memorize.reply` (the reply's checks, sent back for repair, and the memory it becomes).
"""
