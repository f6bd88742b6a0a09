"""Swappable model backends, one small Protocol per capability (faces, ASR, speakers, LLM, embeddings)."""
