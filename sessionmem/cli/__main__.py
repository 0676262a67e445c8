"""``python -m sessionmem.cli``: the same command as the ``sessionmem`` console script."""

from sessionmem.cli import main

if __name__ == "__main__":
    main()
