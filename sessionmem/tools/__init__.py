"""Developer tools: the ``@tool`` decorator, the :class:`Tool` record and dispatch, and JSON schemas made
from type hints."""
