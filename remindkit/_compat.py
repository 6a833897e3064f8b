"""``enum.StrEnum`` on Python 3.10 too: members are ``str``, so they compare equal
to the strings stored in the database and print as their value."""

from __future__ import annotations

import sys
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - exercised on 3.10 only

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

        @staticmethod
        def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
            return name.lower()


__all__ = ["StrEnum"]
