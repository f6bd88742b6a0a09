"""`m3 abstract`, the stage that folds a video's memory lines into summaries, links and conflicts.

Parts: :mod:`~m3cli.stages.abstract.stage` (the command's entry and the per-video fold),
:mod:`~m3cli.stages.abstract.facts` (what the fold carries), :mod:`~m3cli.stages.abstract.tally`
(running totals), :mod:`~m3cli.stages.abstract.summaries`, :mod:`~m3cli.stages.abstract.links`,
:mod:`~m3cli.stages.abstract.conflicts` and :mod:`~m3cli.stages.abstract.llm` (its LLM calls).
"""
