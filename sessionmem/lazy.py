"""Public names loaded on first use: a package's ``__init__`` lists what it offers and where each name is
defined, and a name's module is imported only when the name is first read (PEP 562's module
``__getattr__``). ``import sessionmem`` therefore stays a few milliseconds: pydantic, the runner, the index,
litellm and psycopg load when something that needs them is used.

    __getattr__, __dir__ = lazy_names(__name__, {"sessionmem.config": ["Config"], ...})

Type checkers and readers see the same names through an ``if TYPE_CHECKING:`` import block beside it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_names(
    package: str, where: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the module ``package``, for the names ``where`` lists by the
    module that defines them. A name read once is kept in the package's namespace, so later reads are
    plain attribute reads; a name not listed is an ``AttributeError`` as for any module."""
    source = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = source.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(source))

    return __getattr__, __dir__
