"""`m3 watch`, the memory built while a live source is still being recorded.

Parts: :mod:`~m3cli.stages.live.stage` (the command's entry: rounds over the growing recording) and
:mod:`~m3cli.stages.live.source` (the recorder that spools a stream to a file, and the scanner that
follows it).
"""
