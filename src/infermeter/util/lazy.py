"""Lazy re-exports: a package names its public objects, and each loads on first use.

`import infermeter` (and every `infermeter --help`) must not import torch, transformers,
pandas or SQLAlchemy: a package's `__init__` that re-exported them eagerly cost seconds before
any command ran. With `lazy_exports`, `from infermeter import Store` still works and imports
only the store's modules, at that moment (PEP 562 module `__getattr__`).
"""

from __future__ import annotations

import importlib

# nothing but importlib at run time: the package's __init__ runs this before the CLI's Ctrl-C
# guard (cli/entry.py); type checkers read this name as True
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for a package: name -> module it is defined in.

    A loaded name is kept in the package's namespace, so the import happens once.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
