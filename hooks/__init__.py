"""Hooks bundled with sessionmem, one folder each (``HOOK.md`` + ``handler.py``).

This folder is installed as the package ``sessionmem._bundled_hooks`` (see ``pyproject.toml``);
``sessionmem.hooks.bundled_hooks_dir()`` finds it there or, in a source checkout, here. The
handlers are loaded by file path, never imported as ``hooks.*``.
"""
