"""One turn of a session: its state, the compaction gate, the model turn, the flush, compaction, projection,
streaming, the prompt, events and the session's toolset."""
