"""The pipeline: one module per stage, each a pure function from clip records to clip records.

Installed as ``m3cli.stages``. Read the listing in pipeline order: segment, diarize, voices, faces,
memorize, link, abstract, index, then the ``ask`` package. Beside them: ``core`` (shared machinery),
``eval`` (scoring against ground truth) and ``backends`` (the swappable models).
"""
