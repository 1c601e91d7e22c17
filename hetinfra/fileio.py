"""File I/O every stage may import (it imports only hetinfra.errors, hetinfra.foreign and
hetinfra.appender): the one way to read a user's file, and atomic writes.

Reading (:func:`read_text`): a regular file only (not a directory, FIFO or device, which would
hang or fill memory), at most a stated size, UTF-8 with or without a BOM (spreadsheets write one);
every failure is an InvalidInputError naming the file and what to do (exit 2), never a traceback.

Parsing (:func:`parse_json`, :func:`read_json`): JSON nested at most :data:`MAX_JSON_DEPTH` levels
(checked before parsing: Python's parser and every walker after it recurse, so 100,000 ``[`` would
end in a RecursionError), strict (no NaN/Infinity tokens unless asked), an exit-2 error naming the
file, line and column otherwise. CSV text is split by hetinfra.csvtext.

Writing: a reader (a cron job, ``pulumi``, another hetinfra run) never sees a half-written file:
files are written to a temporary name in the same directory and renamed into place (out dirs, whole
folders: hetinfra.outdir).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from hetinfra.appender import WholeLines, cut_torn_tail
from hetinfra.errors import HetinfraError, InvalidInputError, WriteError
from hetinfra.foreign import refuse_foreign

#: the largest file hetinfra reads by default (a spec, an offers or profiles CSV, a plan): 64 MiB
MAX_READ_BYTES = 64 << 20


def present(path: str | Path) -> bool:
    """Whether anything is at ``path``: a file, a folder, or a symbolic link, one to nothing or to a
    loop of links too. The test of every file of OUT that a command reads if it is there (state.json,
    plan.json): Path.exists() says False for such a link, so a state.json linked to a share that is not
    mounted read as "nothing deployed" (`status`, `destroy`) and `replan` planned as if nothing ran;
    the reader (:func:`read_text`) then says what the link points to."""
    return os.path.lexists(path)


def read_text(path: str | Path, what: str = "file", *, max_bytes: int = MAX_READ_BYTES,
              hint: str | None = None) -> str:
    """The text of the regular file ``path`` (``what`` names it in errors, e.g. "offers CSV")."""
    p = Path(path)
    try:
        info = os.stat(p)
    except FileNotFoundError:
        if p.is_symlink():
            raise InvalidInputError(f"{what} {p} is a symbolic link to nothing ({os.readlink(p)})",
                                    hint=hint or "point the link at the file, or remove it") from None
        raise InvalidInputError(f"{what} not found: {p}", hint=hint) from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {p}: {exc.strerror or exc}", hint=hint) from None
    if stat.S_ISDIR(info.st_mode):
        raise InvalidInputError(f"{what} {p} is a directory, not a file", hint=hint)
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInputError(f"{what} {p} is not a regular file (a pipe, socket or device)", hint=hint)
    if info.st_size > max_bytes:
        raise InvalidInputError(f"{what} {p} is {info.st_size} bytes, more than the {max_bytes} allowed",
                                hint="split it or pass a smaller file")
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {p}: {exc.strerror or exc}", hint=hint) from None
    if len(data) > max_bytes:
        raise InvalidInputError(f"{what} {p} grew past the {max_bytes} bytes allowed while it was read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InvalidInputError(f"{what} {p}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                                hint="save the file as UTF-8") from None


#: deepest nesting of arrays and objects in a JSON file we read (plan.json nests about 8 levels)
MAX_JSON_DEPTH = 64
#: a JSON string, or an unterminated one to the end of the text: a match that starts never fails (each
#: character is one alternative's, and the end is an end), so the scan is linear. Requiring the closing
#: quote made an unterminated string of 100,000 \" pairs a rescan from every quote: O(n^2), a reader that
#: never returned (json.loads then names the unterminated string)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """How deep the arrays and objects of the JSON ``text`` nest (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if len(brackets) > 100_000:  # a big file: count in C
        import numpy as np

        codes = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
        steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
        return int(np.cumsum(steps).max())
    depth = deepest = 0
    for ch in brackets:
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:  # enough to refuse; a 64 MiB '[[[[' stops here at once
                    return deepest
        else:
            depth -= 1
    return deepest


def json_value(text: str | bytes) -> Any:
    """``json.loads`` with the nesting bound, for answers and files whose caller has its own error path
    (exit 4 for a provider's answer, 2 for a user's file): a document nested deeper than MAX_JSON_DEPTH,
    or bytes that are not UTF-8, raise ValueError (a json.JSONDecodeError for the depth, as for any
    malformed document), never a RecursionError the caller's ``except ValueError`` would miss."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError
    if json_depth(text) > MAX_JSON_DEPTH:
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0)
    doc = json.loads(text)
    bad = lone_surrogate(doc, text)
    if bad:
        raise ValueError(bad)
    return doc


#: a \\uD800-\\uDFFF escape: JSON's grammar takes one alone, but it is half of a UTF-16 pair, not a
#: character; json.loads gives a str holding a lone surrogate, which nothing can encode (pydantic's
#: validation of plan.json raised UnicodeEncodeError on one: a traceback in simulate, status, replan)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _strings(doc: Any) -> Iterator[str]:
    """Every string of a parsed JSON document, object keys included (nesting is bounded before parsing)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            stack += [*node, *node.values()]
        elif isinstance(node, list):
            stack += node


def lone_surrogate(doc: Any, text: str) -> str | None:
    """Where ``doc`` (parsed from ``text``) holds a lone surrogate, as ``line L column C: \\uXXXX ...``,
    or None. Walks the document only when ``text`` has such an escape."""
    if not _SURROGATE_ESCAPE.search(text):
        return None
    half = next((ch for s in _strings(doc) for ch in s if "\ud800" <= ch <= "\udfff"), None)
    if half is None:  # the escapes were pairs (an emoji), or an escaped backslash before 'u'
        return None
    at = next(m.start() for m in _SURROGATE_ESCAPE.finditer(text) if int(m.group()[2:], 16) == ord(half))
    line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    return (f"line {line} column {column}: \\u{ord(half):04x} is half of a UTF-16 surrogate pair, not a character "
            "(no text can hold it alone)")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


#: most digits of an integer in a JSON file we read: no count, size or id hetinfra reads has more than
#: 20 (MAX_SCALE is 10^12); Python itself refuses over 4,300 with a message about its own settings
MAX_INT_DIGITS = 100


def _bounded_int(text: str):
    """json's ``parse_int`` for ``text``: an integer of more than MAX_INT_DIGITS digits is a ValueError
    that says where it is (line:column) and what is wrong with it."""
    def parse(digits: str) -> int:
        n = len(digits.lstrip("-"))
        if n > MAX_INT_DIGITS:
            at = text.find(digits)
            line = text.count("\n", 0, at) + 1
            col = at - text.rfind("\n", 0, at)
            raise ValueError(f"line {line} column {col}: an integer of {n:,} digits ({digits[:12]}...), more than "
                             f"the {MAX_INT_DIGITS} any number hetinfra reads has")
        return int(digits)
    return parse


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """json's ``object_pairs_hook``: an object naming one key twice is a ValueError (json.loads keeps
    the last silently; a config.json with two num_attention_heads planned on the second, and the spec's
    YAML loader already refuses a key given twice)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key[:60]!r} appears twice in one object (only one can be read)")
        out[key] = value
    return out


def parse_json(text: str, where: str, *, hint: str | None = None, allow_nan: bool = False) -> Any:
    """The JSON value of ``text`` (``where`` names it in errors): nested at most MAX_JSON_DEPTH levels,
    without NaN/Infinity tokens unless ``allow_nan`` (vLLM's result files write NaN), no key twice in
    one object; every failure an InvalidInputError (exit 2) with the line and column where json knows
    them, never a RecursionError or a traceback."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise InvalidInputError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels",
                                hint=hint or "no file hetinfra reads nests that deep; is it the right file?")
    strict = {} if allow_nan else {"parse_constant": _reject_constant}
    try:
        doc = json.loads(text, parse_int=_bounded_int(text), object_pairs_hook=_unique_keys, **strict)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{where}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})", hint=hint) from None
    except (ValueError, RecursionError) as exc:  # parse_constant's NaN/Infinity, or a huge integer literal
        raise InvalidInputError(f"{where}: not valid JSON ({exc})", hint=hint) from None
    bad = lone_surrogate(doc, text)
    if bad:
        raise InvalidInputError(f"{where}: not valid JSON text ({bad})", hint=hint)
    return doc


def read_json(path: str | Path, what: str = "JSON file", *, max_bytes: int = MAX_READ_BYTES,
              hint: str | None = None, allow_nan: bool = False, parse_hint: str | None = None) -> Any:
    """:func:`read_text` then :func:`parse_json`: the one way to read a JSON file we did not write just now
    (``parse_hint``: the fix for text that is not JSON, where it differs from ``hint``, the fix for a file
    that cannot be read)."""
    return parse_json(read_text(path, what, max_bytes=max_bytes, hint=hint), str(path), hint=parse_hint or hint,
                      allow_nan=allow_nan)


def sha256_text(text: str) -> str:
    """The hex sha256 of ``text`` as UTF-8: plan.json ``inputs.spec_sha256`` of a spec's text, which
    ``simulate`` and the spec's lookup compare a file with."""
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def umask() -> int:
    """The process's umask, read where the system tells it (Linux's /proc/self/status), else by
    setting and restoring it (a moment other threads' files would be made under 022)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def mode_for(path: Path, new: int) -> int:
    """The permission bits a file or folder written at ``path`` gets: those of the one it replaces,
    else ``new`` (0o666 a file, 0o777 a folder) less the umask, as ``open`` and ``mkdir`` give.
    The temporary file or folder a write renames into place is made private (mkstemp's 0600,
    mkdtemp's 0700), and every plan.json, weights.json and skypilot/ had kept that: unreadable to
    the gateway's or CI's other user whatever the umask, and a replaced file lost its mode."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except (OSError, ValueError):
        return new & ~umask()


def atomic_write_text(path: Path, text: str, *, through_links: bool = False) -> None:
    """Write ``text`` to ``path`` whole or not at all: :func:`atomic_write_texts` of one file."""
    atomic_write_texts({Path(path): text}, through_links=through_links)


def written_through(path: Path) -> Path:
    """The file a write of ``path`` replaces: ``path``, or the file a symbolic link there names (the link
    stays). A link to nothing or a loop is an InvalidInputError naming it: there is no file to replace."""
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        what = "to nothing" if isinstance(exc, FileNotFoundError) else \
            "in a loop" if exc.errno == errno.ELOOP else f"that cannot be followed ({exc.strerror or exc})"
        raise InvalidInputError(f"cannot write {path}: it is a symbolic link ({os.readlink(path)}) {what}",
                                hint="remove the link, or make the file it names") from None


def atomic_write_texts(files: dict[Path, str], *, through_links: bool = False) -> None:
    """Write each of ``files`` (path -> text) whole, all or none: every text is written to a
    temporary file beside its path (made with the mode of the file it replaces, else the umask's:
    :func:`mode_for`) before any is renamed into place, and on a failure (a full disk, a signal) the
    temporary files and the folders made for them are removed. `simulate --out D` on a full disk had
    left D/simulation.json without its .svg, or an empty D. A path that exists as anything but a
    regular file (a FIFO, a device, a socket, a folder) refuses them all first, not replaced:
    `profile-import --out /dev/full` had replaced the device node with a file.

    ``through_links`` (a file a flag names: `profile --out`; not a folder's files, `simulate --out D`): a path that is a
    symbolic link is written through (:func:`written_through`): the link was replaced by a file, and
    the file it named, a profile shared with a team's specs, kept its old rows, silently. Off inside
    OUT's staged copy, where writing through a link would write outside OUT before the swap."""
    paths = [written_through(Path(p)) if through_links else Path(p) for p in files]
    for path in paths:
        _refuse_special(path)
    made = sorted({d for path in paths for d in (path.parent, *path.parent.parents) if not d.exists()},
                  key=lambda d: len(d.parts), reverse=True)  # the folders this write makes, deepest first
    temps: list[str] = []
    path = paths[0] if paths else Path()
    try:
        for path, text in zip(paths, files.values()):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            temps.append(tmp)
            os.fchmod(fd, mode_for(path, 0o666))
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for tmp, path in zip(temps, paths):
            os.replace(tmp, path)
    except BaseException as exc:
        _remove_unwritten(temps, made)
        if isinstance(exc, OSError) and not isinstance(exc, HetinfraError):
            raise WriteError.of(exc, path) from None  # exit 2 naming the file, where no caller says it
        raise


def _remove_unwritten(temps: list[str], made: list[Path]) -> None:
    """The temporary files of a write that failed, and the folders made for them."""
    for tmp in temps:
        Path(tmp).unlink(missing_ok=True)
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            pass  # not empty (another writer's file) or already gone


def _refuse_special(path: Path) -> None:
    """InvalidInputError where ``path`` (its target, for a symlink) exists and is not a regular file."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise InvalidInputError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise InvalidInputError(f"{path} exists and is {kind_of(mode)}, not a regular file: it is not replaced",
                                hint="write to a file path (a new one, or a file to overwrite)")


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words (a folder, a FIFO, a socket, a device)."""
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")


def open_append(path: str | Path, what: str, hint: str | None = None, *, ours: Callable[[str], bool] | None = None):
    """``path`` opened to append text (created where there is none), as a hetinfra.appender.WholeLines
    (whole lines per write): the one way hetinfra appends to a file (the gateway's demand log, replan's
    log). Anything there but a regular file (a FIFO, a device, a socket, a folder, a link to one) is an
    InvalidInputError naming ``what``, found without blocking: open() of a FIFO waits for a reader, and
    `gateway --demand-log FIFO` hung before serving, `replan --log-file FIFO` after its run. ``ours``: the
    test of the first line of a file this log wrote; a file there whose first line fails it is another
    file (a plan, a spec), refused untouched (hetinfra.foreign.refuse_foreign); one that passes it has the
    line a stopped run left cut short cut (``.torn``). An OSError (no permission, a full disk) is the caller's."""
    if ours is not None:
        refuse_foreign(path, what, ours, doing="appended to", hint=hint)
    fd, readable = None, ours is not None  # read too: the end of one's own file, for a line cut short
    flags = os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
    try:
        try:
            fd = os.open(path, (os.O_RDWR if readable else os.O_WRONLY) | flags, 0o666)
        except PermissionError:
            if not readable:
                raise
            readable, fd = False, os.open(path, os.O_WRONLY | flags, 0o666)
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        if exc.errno not in (errno.ENXIO, errno.EISDIR):  # ENXIO: a FIFO no process reads
            raise
        mode = stat.S_IFIFO if exc.errno == errno.ENXIO else stat.S_IFDIR
    if not stat.S_ISREG(mode):
        if fd is not None:
            os.close(fd)
        raise InvalidInputError(f"{what} {path} is {kind_of(mode)}, not a regular file: nothing is appended to it",
                                hint=hint or "give the path of a regular file (a new one is created)")
    os.set_blocking(fd, True)
    try:
        torn = cut_torn_tail(fd) if readable else ""
    except OSError:
        os.close(fd)
        raise
    return WholeLines(fd, torn)


def _non_finite_at(doc: object, path: str = "$") -> str | None:
    """JSON path of the first NaN or infinity in ``doc``, or None."""
    if isinstance(doc, float) and doc != doc or doc in (float("inf"), float("-inf")):
        return path
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, (list, tuple)) else ()
    for key, value in items:
        found = _non_finite_at(value, f"{path}.{key}" if isinstance(doc, dict) else f"{path}[{key}]")
        if found:
            return found
    return None


def dumps_strict(doc: object, **kwargs) -> str:
    """JSON text of ``doc`` that every JSON parser reads: NaN and infinities are a bug, raised (with
    the path of the value) instead of written as the non-JSON tokens NaN/Infinity."""
    try:
        return json.dumps(doc, allow_nan=False, **kwargs)
    except ValueError:
        from hetinfra.errors import HetinfraError

        raise HetinfraError(f"internal error: a non-finite number at {_non_finite_at(doc)} would make the JSON "
                            "invalid", hint="please report this with the command and its input") from None
