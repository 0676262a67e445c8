"""The model seam: a protocol the runner calls, a litellm adapter, and a scripted model for tests."""

from sessionmem.model.base import Model, ModelReply, ModelRequest, StreamingModel, supports_streaming

__all__ = ["Model", "ModelReply", "ModelRequest", "StreamingModel", "supports_streaming"]
