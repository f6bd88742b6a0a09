"""Scoring against ground truth: faces, diarization and ASR, question answering. The CLI only calls it."""
