"""Where kraftcheck writes: checked before the work starts, and never over what it does not own.

A report set is published whole: built in a staging directory beside its destination and
swapped in with one atomic rename, so a reader, a kill -9 or a concurrent run never sees a
mixed set. A destination that is a symlink is written through (the link kept); one that is a
mount point cannot be renamed, so the set is staged inside it and its entries swapped in one
by one, under a lock on the directory: each entry whole, not the set. A destination that holds
anything kraftcheck did not write is refused. Files rewritten in place (recorded scenarios) are
all written beside their targets before any is replaced. What a killed run left behind, named
with its process id, the next run removes.
"""

import contextlib
import ctypes
import errno
import fcntl
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from spec.trace import creation_mode

_STAGING = ".kraftcheck-staging-"
_REPLACING = ".kraftcheck-replacing-"
_RENAME_EXCHANGE = 2  # renameat2 flag: swap two paths atomically (Linux 3.15+)
_AT_FDCWD = -100


class OutputError(Exception):
    """An output location kraftcheck cannot or may not write; raised before any work is done."""


def unwritable(directory: Path) -> str | None:
    """Why kraftcheck cannot write in `directory` (creating it if absent), None if it can: the
    reason, so that each caller names the path as its user gave it."""
    if directory.exists() or directory.is_symlink():
        if not directory.is_dir():
            return "not a directory"
        return None if os.access(directory, os.W_OK | os.X_OK) else "not writable"
    ancestor = directory.parent  # where the missing directories would be created
    while not (ancestor.exists() or ancestor.is_symlink()):
        ancestor = ancestor.parent
    problem = unwritable(ancestor)
    return f"cannot be created ({ancestor}: {problem})" if problem else None


def check_directory(out: Path, owned: Callable[[str], bool], what: str) -> None:
    """`out` can take kraftcheck's output: it is absent with a writable parent, or a writable
    directory whose entries are all `owned`."""
    if out.is_dir():
        foreign = sorted(name for name in os.listdir(out) if not owned(name) and not name.startswith(_STAGING))
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise OutputError(f"{out}: holds files kraftcheck did not write ({shown}); refusing to write the {what} there: choose a new or empty directory")
    problem = unwritable(out)
    if problem:
        raise OutputError(f"{out}: {problem}")


def publish_directory(out: Path, fill: Callable[[Path], None], owned: Callable[[str], bool]) -> None:
    """Replace `out` by a directory that `fill` writes (see the module's docstring); `owned` names
    the entries of an earlier set, removed where the set is swapped in entry by entry."""
    out = out.resolve() if out.is_symlink() else out.absolute()
    inside = _is_mount_point(out)
    home = out if inside else out.parent
    home.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(home, _STAGING)
    staging = Path(tempfile.mkdtemp(dir=home, prefix=f"{_STAGING}{os.getpid()}-"))
    try:
        fill(staging)
        for directory in [staging, *(p for p in staging.rglob("*") if p.is_dir())]:
            directory.chmod(creation_mode(directory=True))
        if inside:
            _swap_entries(staging, out, owned)
        else:
            _swap_in(staging, out)
    except OSError as error:
        raise OutputError(f"{out}: cannot publish: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # on success, the previous set


def _is_mount_point(path: Path) -> bool:
    """Whether `path` is where a file system is mounted (a bind mount of a directory of the same
    file system too, which os.path.ismount misses): such a directory cannot be renamed."""
    if os.path.ismount(path):
        return True
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", "rb") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 4 and _unescaped(fields[4]) == os.fsencode(path):
                return True
    return False


def _unescaped(field: bytes) -> bytes:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes (\\040)."""
    return field.replace(b"\\040", b" ").replace(b"\\011", b"\t").replace(b"\\012", b"\n").replace(b"\\134", b"\\")


def _swap_entries(staging: Path, out: Path, owned: Callable[[str], bool]) -> None:
    """Swap each entry of `staging` into `out`, and move the earlier set's other entries into
    `staging` (to be removed with it), holding a lock on `out` against concurrent runs."""
    handle = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        published = set(os.listdir(staging))
        for name in sorted(published):
            _swap_in(staging / name, out / name)
        for name in sorted(os.listdir(out)):
            if name not in published and owned(name) and not name.startswith(_STAGING):
                (out / name).rename(staging / f"{name}-earlier")
    finally:
        os.close(handle)


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


def replace_files(contents: dict[Path, bytes]) -> None:
    """Each file replaced whole by its new contents, all of them or none: every new file is
    written beside its target before any target is replaced, so a full disk or a read-only
    directory leaves every file as it was. A symlink is written through (its target replaced,
    the link kept), and every file keeps its mode."""
    prepared: list[NewFile] = []
    try:
        for path, data in contents.items():
            prepared.append(NewFile(path.resolve(strict=True), data))
    except BaseException as error:
        for new in prepared:
            new.discard()
        if isinstance(error, OSError):
            raise OutputError(f"{path}: cannot write: {error.strerror or error}; no file was replaced") from None
        raise
    for number, new in enumerate(prepared):
        try:
            new.put_in_place()
        except OSError as error:
            for left in prepared[number:]:
                left.discard()
            raise OutputError(f"{new.target}: cannot replace: {error.strerror or error}; {number} of {len(prepared)} files were replaced before it") from None


class NewFile:
    """New contents for `target`, written beside it but not yet in its place. Where the file
    system allows it the file has no name until then (O_TMPFILE), so a run killed meanwhile, by
    SIGKILL too, leaves nothing behind; elsewhere it is a hidden file named with the process id,
    which the next run removes once that process is gone."""

    def __init__(self, target: Path, data: bytes) -> None:
        self.target = target
        self.named: Path | None = None
        mode = stat.S_IMODE(target.stat().st_mode)
        _remove_abandoned(target.parent, _REPLACING)
        handle = -1
        if hasattr(os, "O_TMPFILE"):
            try:
                handle = os.open(target.parent, os.O_TMPFILE | os.O_WRONLY, mode)
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):  # no O_TMPFILE on this file system
                    raise
        if handle < 0:
            handle, name = tempfile.mkstemp(dir=target.parent, prefix=f"{_REPLACING}{os.getpid()}-")
            self.named = Path(name)
        self.handle: int | None = handle
        try:
            with open(handle, "wb", closefd=False) as out:
                out.write(data)
            os.fchmod(handle, mode)
        except BaseException:
            self.discard()
            raise

    def put_in_place(self) -> None:
        """Replace the target by the new file, in one rename."""
        if self.named is None:  # give it a name for the rename, for as short a time as can be
            self.named = self.target.parent / f"{_REPLACING}{os.getpid()}-{secrets.token_hex(6)}"
            directory = os.open(self.target.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:  # a directory descriptor makes os.link call linkat, which follows the /proc link to the file
                os.link(f"/proc/self/fd/{self.handle}", self.named.name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=True)
            finally:
                os.close(directory)
        os.replace(self.named, self.target)
        self.named = None
        self.discard()

    def discard(self) -> None:
        """Let go of the new file, leaving the target as it is."""
        if self.named is not None:
            self.named.unlink(missing_ok=True)
            self.named = None
        if self.handle is not None:
            os.close(self.handle)
            self.handle = None


def _remove_abandoned(parent: Path, prefix: str) -> None:
    """What runs that were killed (their process is gone) left in `parent` under `prefix`:
    staging directories, new files not yet renamed into place."""
    for leftover in parent.glob(f"{prefix}*"):
        pid = leftover.name.removeprefix(prefix).split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


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
