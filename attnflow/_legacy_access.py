"""Item access kept for one release on results that used to be dicts or tuples.

A result that was a dict (``run["merges"]``) or a NamedTuple (``out[0]``, ``a, b = out``) is now
an ``eqx.Module`` with named fields. :class:`LegacyItemAccess` keeps the old access working: the
old key (or position) returns the field, with a ``DeprecationWarning`` that names the field to
use. A result whose time was stored under the key named by its clock (``"s"`` or ``"t"``) has a
``clock`` field, and that key maps to its ``time`` field.

:func:`moved_attribute` is the module ``__getattr__`` of a namespace whose names moved to another
public namespace: the old name returns the same object, with a warning naming the new home.
"""

import dataclasses
import importlib
import warnings
from typing import ClassVar

import equinox as eqx


class LegacyItemAccess(eqx.Module):
    """``result[key]`` (and, for former tuples, ``result[i]`` and unpacking) with a warning."""

    _was_tuple: ClassVar[bool] = False

    def _field_of(self, key) -> str:
        names = [f.name for f in dataclasses.fields(self) if f.name != "clock"]
        if self._was_tuple and isinstance(key, int) and -len(names) <= key < len(names):
            return names[key]
        if isinstance(key, str):
            if key == getattr(self, "clock", None):
                return "time"
            if key in names:
                return key
        raise KeyError(key)

    def __getitem__(self, key):
        name = self._field_of(key)
        warnings.warn(
            f"{type(self).__name__}[{key!r}] is deprecated: use the field .{name}; item access "
            "will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, name)

    def __iter__(self):
        if not self._was_tuple:
            raise TypeError(f"{type(self).__name__} is not iterable: use its fields")
        warnings.warn(
            f"unpacking a {type(self).__name__} is deprecated: use its fields; unpacking will be "
            "removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return iter([getattr(self, f.name) for f in dataclasses.fields(self)])


def moved_attribute(namespace: str, moved: dict[str, str], name: str):
    """``namespace.name`` for a ``name`` that moved to ``moved[name]``: the same object, with a
    DeprecationWarning naming its new home (AttributeError for a name that is not in ``moved``)."""
    if name not in moved:
        raise AttributeError(f"module {namespace!r} has no attribute {name!r}")
    home = moved[name]
    message = f"{namespace}.{name} moved to {home}.{name}; the old name will be removed"
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(home), name)
