"""Where kraftcheck writes: checked before the work starts, and never over what it does not own.

A report set is published whole: built in a staging directory beside its destination and
swapped in with one atomic rename, so a reader, a kill -9 or a concurrent run never sees a
mixed set. A destination that holds anything kraftcheck did not write is refused.
"""

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from spec.trace import creation_mode

_STAGING = "kraftcheck-staging-"
_RENAME_EXCHANGE = 2  # renameat2 flag: swap two paths atomically (Linux 3.15+)
_AT_FDCWD = -100


class OutputError(Exception):
    """An output location kraftcheck cannot or may not write; raised before any work is done."""


def check_directory(out: Path, owned: Callable[[str], bool], what: str) -> None:
    """`out` can take kraftcheck's output: it is absent with a writable parent, or a writable
    directory whose entries are all `owned`."""
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise OutputError(f"{out}: not a directory (kraftcheck writes the {what} into a directory)")
        foreign = sorted(name for name in os.listdir(out) if not owned(name))
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise OutputError(f"{out}: holds files kraftcheck did not write ({shown}); refusing to write the {what} there: choose a new or empty directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise OutputError(f"{out}: not writable")
        return
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{out}: cannot be created ({parent} is not a writable directory)")


def publish_directory(out: Path, fill: Callable[[Path], None]) -> None:
    """Replace `out` by a directory that `fill` writes, in one atomic step (see the module's docstring)."""
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_staging(out.parent)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{_STAGING}{os.getpid()}-"))
    try:
        fill(staging)
        for directory in [staging, *(p for p in staging.rglob("*") if p.is_dir())]:
            directory.chmod(creation_mode(directory=True))
        _swap_in(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # on success, the previous set


def _swap_in(staging: Path, out: Path) -> None:
    """Put `staging` at `out`; the previous `out`, if any, ends up at `staging`.

    Another run may publish to `out` at the same moment, so neither "out exists" nor "out is
    absent" holds for long: try the exchange, and where there was nothing to exchange with,
    the plain rename (which fails if a concurrent run just put a set there: then exchange).
    """
    for _ in range(100):
        found = _exchange(staging, out)
        if found == 0:
            return
        if found == errno.ENOENT:
            try:
                staging.rename(out)
                return
            except OSError as error:
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                continue
        if found in (errno.ENOSYS, errno.EINVAL, -1):  # no atomic exchange here: retire, then rename
            retired = staging.with_name(staging.name + "-old")
            if out.exists():
                out.rename(retired)
            staging.rename(out)
            if retired.exists():
                retired.rename(staging)
            return
        raise OSError(found, f"cannot publish {out}: {os.strerror(found)}")
    raise OSError(f"cannot publish {out}: it keeps changing under concurrent runs")


def _exchange(a: Path, b: Path) -> int:
    """Swap two paths atomically with renameat2(RENAME_EXCHANGE): 0, an errno, or -1 where the call is missing."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return -1
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return 0
    return ctypes.get_errno()


def _remove_abandoned_staging(parent: Path) -> None:
    """Staging directories of runs that were killed (their process is gone)."""
    for leftover in parent.glob(f".{_STAGING}*"):
        pid = leftover.name.removeprefix(f".{_STAGING}").split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owned_names(names: Iterable[str]) -> Callable[[str], bool]:
    """An ownership test for a fixed set of entry names."""
    known = frozenset(names)
    return known.__contains__
