"""Embeddings: the embedder seam, choosing a provider, the local GGUF model and remote providers."""
