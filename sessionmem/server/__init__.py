"""What sessionmem serves over HTTP: the pieces every server of it shares (``auth``: who may call)."""
