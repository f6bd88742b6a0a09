"""`m3 index`, the stage that writes clip records into a memory (LanceDB tables, indexes, people).

Parts: :mod:`~m3cli.stages.index.stage` (the command's entry: the all-or-nothing write, one commit per
table, rollback of a failed run), :mod:`~m3cli.stages.index.nodes` (memory lines and abstractions as
node rows: weight voting, conflicts, re-resolution), :mod:`~m3cli.stages.index.entities` (entity, edge
and clip rows, with the crops and keyframes they keep), :mod:`~m3cli.stages.index.rows` (what the row
builders share: a video's view, stored rows, embeddings) and :mod:`~m3cli.stages.index.indexes` (the
full-text, scalar and vector indexes). The people step is :mod:`~m3cli.stages.people.add`.
"""
