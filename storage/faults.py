"""Storage faults told in one line: a full disk, a read-only or permission-denied store or source.

An ``OSError`` from deep inside zarr says ``[Errno 28] No space left on device`` and a chunk's
temporary file name. A user needs the store (or source) it happened on, the cause in words and
what to do; finished stages are never touched by such a fault (zarr writes each file to a
temporary name and renames it), so a re-run after fixing it resumes.
"""

from __future__ import annotations

import errno
import os

#: errno -> the words users see (the errors a run cannot fix by retrying)
FAULTS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}
_ADVICE = {
    errno.ENOSPC: "free space and re-run",
    errno.EDQUOT: "free space and re-run",
}


def storage_oserror(e: BaseException | None) -> OSError | None:
    """The OSError with a fault errno in ``e`` or the exceptions it was raised from, if any."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in FAULTS:
            return e
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return None


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(root)]) == os.path.realpath(root)
    except ValueError:
        return False


def fault_line(e: BaseException, store_url: str | None = None, doing: str = "") -> str | None:
    """One line for a storage fault in ``e`` (None when there is none): the store when the file
    is in it (or unnamed), else the file itself (a source), the cause, and what to do."""
    ose = storage_oserror(e)
    if ose is None:
        return None
    what = FAULTS[ose.errno]
    name = ose.filename if isinstance(ose.filename, str) else None
    local = None
    if store_url:
        from anonymask.storage.claims import local_store_path

        local = local_store_path(store_url)
    if name and (local is None or not _inside(name, str(local))):
        return f"{name}: {what}" + (f" ({doing})" if doing else "")
    where = store_url or name or "store"
    advice = _ADVICE.get(ose.errno, "make it writable and re-run")
    return f"{where}: {what}" + (f" while writing {doing}" if doing else "") + f"; {advice} (finished stages are kept)"
