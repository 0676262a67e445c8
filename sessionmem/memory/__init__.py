"""Markdown memory: discovery, chunking, the SQLite index, embeddings, search and the agent tools."""
