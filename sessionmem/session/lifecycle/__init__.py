"""A session's life around its turns: slash commands, rotation (``/new``, resets), the archive on ``/new``,
slugs, and forgetting a person."""
