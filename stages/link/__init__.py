"""`m3 link`, the stage that joins faces and voices into `<character_k>` ids over a whole video.

Parts: :mod:`~m3cli.stages.link.stage` (the command's entry and the voting) and
:mod:`~m3cli.stages.link.seen_speaking` (splitting a voice two people share, by whose lips move).
"""
