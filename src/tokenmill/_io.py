"""Files: atomic writes (a temporary file renamed into place) and strict UTF-8 reading."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from tokenmill._args import refuse_one_text
from tokenmill.errors import InputError

Errors = Literal["strict", "replace"]


def write_target(path: Path) -> Path:
    """The file that a write to ``path`` replaces (a temporary file beside it is renamed over
    it): ``path``, or where a symbolic link there leads, so the link is kept (/dev/stdout's
    leads to the terminal or file that output goes to). Refused, in one line, when its folder
    is missing or when it is there and is not a regular file (a device such as /dev/full, a
    terminal, a named pipe, a folder): renaming a file over it would replace it, not write
    into it."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    directory = target.parent
    if not directory.is_dir():
        raise InputError(f"{path}: directory {directory} does not exist")
    if target.exists() and not target.is_file():
        raise InputError(f"{path}: not a regular file (a device, a pipe or a directory); "
                         "expected the path of a file to write")
    return target


def temp_beside(beside: Path, made: list[Path], suffix: str = ".tmp") -> int:
    """A new temporary file beside ``beside`` (the file it will be renamed over), open for
    writing as a file descriptor, with the permissions a new file gets from the umask.

    Its name goes into ``made`` before the file is created, so a caller whose ``finally``
    unlinks every name in ``made`` leaves nothing behind wherever an interrupt lands (Ctrl-C,
    or SIGTERM raised as an exception by the CLI): with ``tempfile.mkstemp`` the file existed
    before its name was known here, and a SIGTERM in between left it on disk."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        name = beside.parent / f".{beside.name}.{secrets.token_hex(6)}{suffix}"
        made.append(name)
        try:
            return os.open(name, flags, 0o666)  # (the umask applies)
        except FileExistsError:  # (another writer's: 48 random bits, not seen in practice)
            made.remove(name)


def unlink_all(names: list[Path]) -> None:
    """Remove the files named (those that exist), emptying the list."""
    while names:
        names.pop().unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one, never a
    part: write a temporary file beside it, flush it to disk, then rename it over ``path``."""
    path = Path(path)
    target = write_target(path)
    made: list[Path] = []
    try:
        try:
            fd = temp_beside(target, made)
        except OSError as e:
            raise InputError(f"{path}: cannot write a file in {target.parent} "
                             f"({e.strerror})") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(made[0], target)
        except OSError as e:
            raise InputError(f"{path}: cannot write ({e.strerror})") from None
    finally:
        unlink_all(made)


def read_file(path: Path, expected: str) -> bytes:
    """The bytes of ``path``; a missing file or a folder is an error naming ``expected`` (what
    the file should have been, e.g. "a tokenizer.json file")."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected {expected}") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None


_REPLACE_HINT = "use errors='replace' (--errors replace) to go on with U+FFFD in its place"


def read_lines(path: str | os.PathLike[str], errors: Errors = "strict",
               remedy: str = _REPLACE_HINT) -> Iterator[str]:
    """The lines of a UTF-8 text file, without line ends, streamed.

    A byte sequence that is not UTF-8 stops the read with an error that names the file and the
    byte offset, unless ``errors="replace"`` (then it becomes U+FFFD and reading goes on).
    """
    path = Path(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a text file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    offset = 0
    with f:
        for raw in f:
            try:
                line = raw.decode("utf-8", errors)
            except UnicodeDecodeError as e:
                raise InputError(
                    f"{path}: not UTF-8 at byte offset {offset + e.start} "
                    f"(byte 0x{raw[e.start]:02x}); {remedy}") from None
            offset += len(raw)
            yield line.rstrip("\r\n")


def lone_surrogate(text: str, what: str = "text") -> str | None:
    """The one-line error for a ``text`` that cannot be UTF-8 encoded (it holds a lone
    surrogate), naming it ``what``; None for valid text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (f"{what} holds a lone surrogate U+{ord(text[e.start]):04X} at character "
                f"{e.start}; it is not valid Unicode text")
    return None


def is_utf8_text(text: str) -> bool:
    """Whether ``text`` can be UTF-8 encoded (it holds no lone surrogate)."""
    return lone_surrogate(text) is None


def check_text(text: str, what: str = "text") -> None:
    """Raise a clear error if ``text`` cannot be UTF-8 encoded (it holds a lone surrogate)."""
    if not isinstance(text, str):
        raise InputError(f"{what}: expected a string, got {type(text).__name__}")
    if (message := lone_surrogate(text, what)) is not None:
        raise InputError(message)


def text_batch(texts: Iterable[str]) -> Sequence[str]:
    """A batch's texts as the core takes them: the caller's own list or tuple (the core keeps
    each text alive itself while it works), anything else made a list. (A copy here was one
    more pass over every text, to take a reference and to give it back.) InputError for one
    str (or bytes) given as the batch, whose characters would each be taken for a text."""
    if isinstance(texts, (list, tuple)):
        return texts
    refuse_one_text(texts, "texts", "a list of strings", "encode_ordinary")
    return list(texts)


def check_texts(texts: Sequence[str]) -> None:
    """:func:`check_text` on each of a batch's texts, named ``texts[i]``. The batch calls run it
    only once the core has refused a text: checking every text first cost a tenth of the
    encoding of short documents."""
    for i, text in enumerate(texts):
        check_text(text, f"texts[{i}]")
