"""Keeping the index in step with the workspace: sources, chunking, sync passes, session transcripts,
watching."""
