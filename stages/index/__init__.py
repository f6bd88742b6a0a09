"""`m3 index`, the stage that writes clip records into a memory (LanceDB tables, indexes, people)."""
