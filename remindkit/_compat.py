"""What the standard library lacks or does slowly: ``enum.StrEnum`` on Python 3.10
too (members are ``str``, so they compare equal to the strings stored in the
database and print and repr as their value), a faster ``__init__`` for frozen
dataclasses (:func:`quick_init`), and a pause of the cyclic garbage collector
(:func:`collector_paused`)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
from collections.abc import Iterator
from enum import Enum
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from enum import StrEnum as _StrEnum
else:  # pragma: no cover - exercised on 3.10 only

    class _StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

        @staticmethod
        def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
            return name.lower()


class StrEnum(_StrEnum):
    """A ``str`` enum whose members also *repr* as their value (``'active'``): a state
    read from the store shows in a tuple, a dataclass's repr or a log line as the
    plain string it was before these fields were typed."""

    def __repr__(self) -> str:
        return repr(self._value_)


C = TypeVar("C", bound=type)
_UNSET = object()  # a default_factory field that was not given


def quick_init(cls: C) -> C:
    """Give a frozen dataclass an ``__init__`` that fills the instance's ``__dict__``
    directly. The generated one calls ``object.__setattr__`` once a field (plain
    assignment raises on a frozen class), ~0.1 us each: a ``Reminder`` cost 2.9 us
    to make, and a listing, a claim or an import makes thousands. The signature,
    defaults, default factories and ``__post_init__`` are the generated one's; the
    class stays frozen (assigning a field still raises). Apply it above
    ``@dataclass(frozen=True)``; classes with slots, ``InitVar`` or keyword-only
    fields are refused."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"quick_init wants a frozen dataclass without slots, not {cls!r}")
    if any("InitVar" in str(v) for v in cls.__dict__.get("__annotations__", {}).values()):
        raise TypeError(f"quick_init: {cls.__name__} has an InitVar")
    ns: dict[str, Any] = {"_UNSET": _UNSET}
    args: list[str] = []
    body: list[str] = ["    d = self.__dict__"]
    for f in dataclasses.fields(cls):
        if f.kw_only:
            raise TypeError(f"quick_init: {cls.__name__}.{f.name} is keyword-only")
        has_default = f.default is not dataclasses.MISSING
        factory = f.default_factory
        if has_default:
            ns[f"_d_{f.name}"] = f.default
        if factory is not dataclasses.MISSING:
            ns[f"_f_{f.name}"] = factory
        if not f.init:
            if has_default:
                body.append(f"    d[{f.name!r}] = _d_{f.name}")
            elif factory is not dataclasses.MISSING:
                body.append(f"    d[{f.name!r}] = _f_{f.name}()")
            continue
        if has_default:
            args.append(f"{f.name}=_d_{f.name}")
            body.append(f"    d[{f.name!r}] = {f.name}")
        elif factory is not dataclasses.MISSING:
            args.append(f"{f.name}=_UNSET")
            body.append(f"    d[{f.name!r}] = _f_{f.name}() if {f.name} is _UNSET else {f.name}")
        else:
            args.append(f.name)
            body.append(f"    d[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body)
    exec(source, ns)  # noqa: S102 - built from the class's own field names only
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__  # type: ignore[misc]
    cls.__init__ = init  # type: ignore[misc]
    return cls


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (it was on: it is on again after). For
    work that makes many objects that live until it ends (an import's lines and
    reminders): the interpreter would otherwise walk all of them again at every
    collection it starts, a fifth of an import's time, to find no cycle (they are
    freed by reference counting). Another thread that turned the collector off
    meanwhile has it turned on again when the outermost pause ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


__all__ = ["StrEnum", "collector_paused", "quick_init"]
