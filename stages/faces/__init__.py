"""`m3 faces`, the stage that finds, follows and clusters the faces of a video.

Parts: :mod:`~m3cli.stages.faces.stage` (the command's entry: the quality filter, the fold over a
video's clips, the model, still images), :mod:`~m3cli.stages.faces.detect` (the cached per-clip step:
frames sampled, faces detected and embedded, crops, frame changes),
:mod:`~m3cli.stages.faces.cluster` (who is who: local clusters, the per-video face bank, the
whole-video reclustering) and :mod:`~m3cli.stages.faces.tracks` (the record's ``faces`` section:
tracks, crops and mean embeddings stored, shot changes).
"""
