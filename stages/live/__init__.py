"""`m3 watch`, the memory built while a live source is still being recorded.

Parts: :mod:`~m3cli.stages.live.stage` (the command's entry: rounds over the growing recording),
:mod:`~m3cli.stages.live.source` (the recorder that spools a stream to a file, and the scanner that
follows it), :mod:`~m3cli.stages.live.state` (the state folder, its lock and ``state.json``),
:mod:`~m3cli.stages.live.status` (what ``--status`` reports), :mod:`~m3cli.stages.live.folder` (a drop
folder, file by file); the heap's upkeep is :mod:`~m3cli.stages.core.heap`, shared with `m3 run`.
"""
