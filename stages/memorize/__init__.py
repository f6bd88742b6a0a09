"""`m3 memorize`, the stage that writes each clip's episodic and semantic memory lines."""
