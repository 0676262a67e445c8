"""The agent's memory tools: ``memory_search`` / ``memory_get``, the paths they may touch, the recall prompt,
and the history of replaced files."""
