"""A check's outcome, the one closed vocabulary every part of mha-check reads (checks, engine, renderers, front ends).

- `PASS`: the claim holds on every configuration tried;
- `FAIL`: evidence of a bug in the student's code;
- `CANNOT_TELL`: mha-check could not drive or map the module, or reached one of its own limits: it says nothing about
  the code, and says what would help;
- `SKIP`: a prerequisite did not pass, so the check did not run.

A `str` enum: a member is equal to its value, hashes as it and is written as it (`json.dumps`, f-strings), so reports
read back from JSON, CSV rows and the literals of older code compare equal to the members without conversion.
"""
from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10 (Ubuntu 22.04's): what 3.11's StrEnum is, for our members
    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    CANNOT_TELL = "cannot_tell"
    SKIP = "skip"


STATUSES = tuple(Status)  # in the report's order: pass, fail, cannot_tell, skip
