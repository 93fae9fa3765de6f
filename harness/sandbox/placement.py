"""Where a target's files go in the child's scratch folder, and whether the target is mha-check's own code.

The trusted side decides both from the target as given and from where its file really is (Subject copies the
folder named here into the slot's scratch; a submission's code gets our packages hidden from it).
"""
from __future__ import annotations

import os

from harness.wire.names import own_code
from harness.wire.target import Target

__all__ = ["own_code", "placement"]  # own_code: harness.wire.names decides it, with the other name rules


def placement(target: Target, search_dir: str, submission: str | None) -> tuple[str, str | None, str | None]:
    """(the folder to copy into the scratch, the target file relative to it, the target file's own path); the
    last two are None for a module target.  A file outside the folder copied is not copied: the child cannot see
    it, and says so by the file's own name."""
    if not target.is_file:
        return submission or search_dir, None, None
    path = os.path.normpath(os.path.join(search_dir, target.where))
    root = os.path.abspath(submission) if submission else os.path.dirname(path)
    rel = os.path.relpath(path, root)
    return root, (rel if not rel.startswith("..") else path), path
