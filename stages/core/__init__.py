"""Machinery every stage shares: media decoding, the content-addressed cache, configuration, errors,
the run context, the memory-store schema and the memory stages' prompts."""
