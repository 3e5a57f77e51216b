"""Files an operator handles: what went wrong with one, inputs never overwritten, outputs whole.

Three habits (issue 31 §3-4):

- **Say what happened.** A SQLite failure is one of four things an operator can act on: the disk
  is full (:class:`DiskFullError`), the file or its folder is read-only (:class:`ReadOnlyError`),
  the file is damaged or not a database (:class:`CorruptFileError`), or another process holds it
  (:class:`FileBusyError`). :func:`classify_sqlite` tells them apart by SQLite's own error code
  (``sqlite3.Error.sqlite_errorname``, Python 3.11), never by "any ``OperationalError`` is busy".
- **The input is sacred.** :func:`refuse_inputs` refuses an output (``--out``, its twin, its
  sidecars, ``--store``, ``--ledger``) that *is* an input file -- compared with
  :func:`os.path.samefile`, so hard and symbolic links count -- before any work.
- **No output without its record.** :func:`write_pair` writes a data file and its record to
  temporary names in the same folder, renames the record first and the data last
  (:func:`os.replace` is atomic on POSIX and Windows): a reader who sees the data file sees its
  complete record; a failure (a full disk) leaves the old files, or none, and no partial file.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from mechanisms import DPStreamError, ParameterError

__all__ = [
    "CorruptFileError",
    "DiskFullError",
    "FileBusyError",
    "FileStateError",
    "ReadOnlyError",
    "classify_os",
    "classify_sqlite",
    "refuse_inputs",
    "write_pair",
]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


class FileStateError(DPStreamError):
    """A file could not be used as it is (full disk, read-only, damaged, busy)."""


class DiskFullError(FileStateError):
    """No space left where the file is written (SQLITE_FULL, ENOSPC, EFBIG)."""


class ReadOnlyError(FileStateError):
    """The file or its folder cannot be written (SQLITE_READONLY, EROFS, EACCES)."""


class CorruptFileError(FileStateError):
    """The file is damaged or not a database (SQLITE_CORRUPT, SQLITE_NOTADB)."""


class FileBusyError(FileStateError):
    """Another process holds the file's lock (SQLITE_BUSY, SQLITE_LOCKED)."""


def _kind(exc: sqlite3.Error) -> type[FileStateError] | None:
    name = getattr(exc, "sqlite_errorname", None) or ""
    text = str(exc).lower()
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        return DiskFullError
    if name.startswith(("SQLITE_READONLY", "SQLITE_PERM")) or "readonly" in text:
        return ReadOnlyError
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in text:
        return CorruptFileError
    if "not a database" in text:
        return CorruptFileError
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return FileBusyError
    if name.startswith("SQLITE_IOERR"):  # writes refused at the size limit (RLIMIT_FSIZE)
        growing = ("WRITE", "SHMSIZE", "TRUNCATE", "FSYNC", "SHMMAP")
        return DiskFullError if name.endswith(growing) else None
    if name.startswith("SQLITE_CANTOPEN"):
        return ReadOnlyError
    return None


_ADVICE = {
    DiskFullError: "the disk (or the file size limit) is full. Free space and run the same "
    "command again: whole periods and charges already committed are kept",
    ReadOnlyError: "it cannot be written (read-only file, folder or mount). Stored periods can "
    "still be read; to release new ones, run where the file is writable",
    CorruptFileError: "it is damaged or not a SQLite database. Do not replace it with a new "
    "file (that would release the same data again); restore it from a backup "
    "('dpstream store backup' makes one) with its side files",
    FileBusyError: "another process holds its lock. Wait for it to finish and run again",
}


def classify_sqlite(exc: sqlite3.Error, what: str) -> DPStreamError:
    """The typed one-line error for a SQLite failure on ``what`` (e.g. "The store 'ops.db'").

    Unrecognised errors come back as a plain :class:`~mechanisms.DPStreamError` naming SQLite's
    code, never as "busy"."""
    kind = _kind(exc)
    if kind is None:
        code = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        return FileStateError(f"{what} could not be used: SQLite reported {code} ({exc}).")
    return kind(f"{what}: {_ADVICE[kind]}.")


def classify_os(exc: OSError, what: str) -> DPStreamError | None:
    """The typed error for an operating-system failure writing ``what`` (None: not a file state)."""
    if exc.errno in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", -1)):
        return DiskFullError(f"{what}: {_ADVICE[DiskFullError]}.")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ReadOnlyError(f"{what}: {_ADVICE[ReadOnlyError]}.")
    return None


def refuse_inputs(
    outputs: Iterable[tuple[str, str | os.PathLike | None]],
    inputs: Iterable[str | os.PathLike | None],
    command: str,
) -> None:
    """Refuse any output that is an input file (:func:`os.path.samefile`: links included).

    Parameters
    ----------
    outputs : iterable of (option, path)
        The files a command will write or open for writing (``("--out", "x.csv")``, the wide
        twin, sidecars, ``("--store", ...)``, ``("--ledger", ...)``); None paths are skipped.
    inputs : iterable of path
        The files it reads (INPUT, ``--hierarchy``, ``--truth``); None or missing are skipped.
    command : str
        The command's name, for the message.

    Raises
    ------
    ParameterError
        Naming the option and the input it would overwrite. Nothing is read or written.
    """
    existing = [Path(p) for p in inputs if p is not None and Path(p).exists()]
    for option, out in outputs:
        if out is None or not Path(out).exists():
            continue
        for inp in existing:
            if os.path.samefile(out, inp):
                raise ParameterError(
                    f"The {option!r} option of {command} names an input file ({str(out)!r} is "
                    f"{str(inp)!r}): it would be overwritten. Name another file; the input is "
                    "never written."
                )


def write_pair(
    data_path: str | os.PathLike,
    write_data: Callable[[Path], None],
    record_path: str | os.PathLike,
    write_record: Callable[[Path], None],
) -> None:
    """Write a data file and its record atomically as a pair (module notes).

    ``write_data(tmp)`` and ``write_record(tmp)`` write to temporary files in the targets'
    folders; then the record is renamed into place, then the data. On any failure the
    temporary files are removed and the error is raised (an ``OSError`` of a full or read-only
    disk as :class:`DiskFullError` / :class:`ReadOnlyError`)."""
    data, record = Path(data_path), Path(record_path)
    temps: list[Path] = []
    try:
        tmp_data = _temp_beside(data, temps)
        write_data(tmp_data)
        tmp_record = _temp_beside(record, temps)
        write_record(tmp_record)
        os.replace(tmp_record, record)
        temps.remove(tmp_record)
        os.replace(tmp_data, data)
        temps.remove(tmp_data)
    except OSError as exc:
        typed = classify_os(exc, f"The output {data.name!r}")
        if typed is None:
            raise
        raise typed from None
    finally:
        for tmp in temps:
            tmp.unlink(missing_ok=True)


def _temp_beside(target: Path, temps: list[Path]) -> Path:
    """A new empty temporary file next to ``target`` with the same suffix (writers that pick the
    format by extension keep working)."""
    folder = target.parent if str(target.parent) else Path(".")
    fd, name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=folder
    )
    os.close(fd)
    temps.append(Path(name))
    os.chmod(name, 0o666 & ~_UMASK)  # mkstemp's 0600 would outlive the rename
    return Path(name)
