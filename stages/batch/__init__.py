"""`m3 batch`, many videos into one memory.

Parts: :mod:`~m3cli.stages.batch.stage` (the command's entry, the local engine and the one writer)
and :mod:`~m3cli.stages.batch.ray` (the Ray engine, ``pip install 'm3-video[ray]'``).
"""
