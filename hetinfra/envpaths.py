"""Paths that come from the environment, checked where they are read, as the path flags are
(hetinfra.cli.common.UserPath): ``HETINFRA_CACHE_DIR``, ``HOME``, ``XDG_CACHE_HOME``, the Hugging Face
cache variables, ``SKY_RUNTIME_DIR``, ``HETINFRA_SKYPILOT_CATALOG`` and each entry of ``KUBECONFIG``.
A value no file can have (a name over 255 bytes: ``Path.is_dir`` raises on it) was a traceback in
`feeds list` and `prices --feeds cache`, and "malformed feed data" (exit 4) in `feeds refresh`; it is
exit 2 naming the variable. It imports only hetinfra.errors, so every stage may use it."""

from __future__ import annotations

import errno
import os
import pwd
from pathlib import Path
from typing import Mapping

from hetinfra.errors import InvalidInputError

__all__ = ["CACHE_OFF", "NAME_MAX", "ROOT_VARS", "XDG_VARS", "cache_dir_var", "env_path", "home_dir", "homeless", "path_problem", "word_path"]

#: the longest file or folder name (bytes) Linux and macOS file systems take
NAME_MAX = 255


def path_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot name a file to look up, or None: a NUL byte, bytes that are not UTF-8, a
    name over :data:`NAME_MAX` bytes anywhere in it, or a lookup error other than "not there" (a
    missing path is fine: a writer makes it). The one rule of path flags, arguments and variables.
    Bytes that are not UTF-8 reach Python as surrogates: a spec so named was a UnicodeEncodeError
    traceback in `plan` (its path hashed for plan.json's service_id). The lookup follows symbolic
    links: a loop of them (ELOOP) is named here; pathlib's resolve() raised RuntimeError on one (a
    traceback in `plan --out LOOP`), and click's exists check called it "does not exist"."""
    text = os.fsdecode(path)
    if "\0" in text:
        return "holds a NUL byte"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # bytes the file system decoding kept as surrogates (surrogateescape)
        byte = os.fsencode(text[exc.start:exc.end])[:1].hex()
        return f"is not UTF-8 text (byte 0x{byte}): rename it (paths are recorded and printed as text)"
    if any(len(os.fsencode(part)) > NAME_MAX for part in Path(text).parts):
        return f"{os.strerror(errno.ENAMETOOLONG)} (a name over {NAME_MAX} bytes)"
    try:
        os.stat(text)  # a dangling link is "not there" (ENOENT), as a missing path
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            return exc.strerror or str(exc)
    return None


def _clipped(value: str) -> str:
    return value if len(value) <= 60 else value[:57] + "..."


#: what ``HETINFRA_CACHE_DIR`` holds to switch the template cache off (docs/reference/cli.md): no folder
CACHE_OFF = ("off", "0", "none")
#: the variables that must be absolute paths: HOME (``~`` is HOME itself, and a relative home names another
#: one in every directory a command runs from; HOME='~' was a RuntimeError traceback)
ROOT_VARS = frozenset({"HOME"})
#: the XDG base directory variables hetinfra reads: the XDG rules say a relative value "should be considered
#: invalid and ignored", so it is (the default under HOME applies). Refusing it (round eight) stopped every
#: `plan` of a CI job that set XDG_CACHE_HOME=.cache. The other folder variables (HETINFRA_CACHE_DIR, the
#: Hugging Face cache's, SKY_RUNTIME_DIR) are taken as given, relative to the working directory, as
#: huggingface_hub and SkyPilot read theirs
XDG_VARS = frozenset({"XDG_CACHE_HOME"})


def env_path(var: str, env: Mapping[str, str] | None = None) -> Path | None:
    """``$var`` as a path (``~`` expanded), None when unset or blank (or, for :data:`XDG_VARS`, relative),
    or an InvalidInputError (exit 2) naming the variable where :func:`path_problem` finds one, where a
    ``~`` cannot be expanded, where a variable of :data:`ROOT_VARS` is not an absolute path, or where it
    names a file (each variable read here is a folder). ``env``:
    the environment to read (default ``os.environ``)."""
    value = (os.environ if env is None else env).get(var, "")
    if not value.strip():
        return None
    hint = f"set {var} to the absolute path of a folder (or unset it for the default)"
    path = Path(value) if var == "HOME" else _expanded(var, value, env, hint)  # ~ is $HOME itself
    problem = path_problem(path)
    if problem is None and var in ROOT_VARS and not path.is_absolute():
        problem = "is not an absolute path (it would name another folder in every directory a command runs from)"
    if problem is None and path.exists() and not path.is_dir():  # every variable read here names a folder
        problem = "is a file, not a folder"  # `feeds list` said "no snapshots in <the file>"
    if problem:
        raise InvalidInputError(f"{var}={_clipped(value)!r}: {problem}", hint=hint)
    return None if var in XDG_VARS and not path.is_absolute() else path


def cache_dir_var() -> Path | None:
    """``$HETINFRA_CACHE_DIR`` as a folder (:func:`env_path`), None where it is unset, blank or one of the
    words that switch the template cache off (:data:`CACHE_OFF`): the template cache and the price store
    read it through this one rule (the store kept a folder named ``off`` in the working directory)."""
    value = os.environ.get("HETINFRA_CACHE_DIR", "")
    return None if value.strip().lower() in CACHE_OFF else env_path("HETINFRA_CACHE_DIR")


def _expanded(var: str, value: str, env: Mapping[str, str] | None, hint: str) -> Path:
    """``value`` with a leading ``~`` (the home, checked: :func:`home_dir`) or ``~user`` expanded;
    pathlib's expanduser raised RuntimeError on ``~nobody`` or under ``HOME='~'`` (a traceback)."""
    if not value.startswith("~"):
        return Path(value)
    head, _, rest = value.partition("/")
    if head == "~":
        base = home_dir(env)
    else:
        base = Path(os.path.expanduser(head))
        if str(base) == head:
            raise InvalidInputError(f"{var}={_clipped(value)!r}: {head[1:]!r} is no user of this machine, so "
                                    f"{head} names no folder", hint=hint)
    return base / rest if rest else base


def homeless(env: Mapping[str, str] | None = None) -> bool:
    """Whether this user has no home at all: HOME unset and no password database entry (a container
    run as an arbitrary uid, as OpenShift and ``docker run -u 12345`` do). What only speeds a command
    up (the template cache) is then skipped, not refused; what must be stored (the price store, Pulumi's
    state) still asks for HOME (:func:`home_dir`). A HOME that is set but wrong is never homeless: it is
    refused where it is read."""
    if (os.environ if env is None else env).get("HOME", "").strip():  # blank is unset, as env_path reads it
        return False
    try:
        pwd.getpwuid(os.getuid())
    except (KeyError, OSError):
        return True
    return False


def home_dir(env: Mapping[str, str] | None = None) -> Path:
    """The user's home: ``$HOME`` checked (:func:`env_path`), else the password database's; a user
    with neither (a container run with ``-u 12345``) is told to set HOME (pathlib raised RuntimeError)."""
    home = env_path("HOME", env)
    if home is not None:
        return home
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, OSError):
        raise InvalidInputError(f"HOME is not set and the password database has no user {os.getuid()}",
                                hint="set HOME to the absolute path of a folder, or HETINFRA_CACHE_DIR "
                                     "and HF_HOME") from None


def word_path(what: str, value: str, hint: str, base: Path | None = None) -> Path:
    """A path a user gives inside a word that is not a path flag (``--feeds PATH``, beside snapshot, live
    and cache): a leading ``~`` expanded as in the folder variables (:func:`_expanded`), then the rule of
    the path flags (:func:`path_problem`), else exit 2 naming ``what``. `--feeds` of a name over 255 bytes
    was an OSError traceback in `plan`, `prices` and `replan`, ``~nobody/x.csv`` a RuntimeError one, and a
    loop of links "no such file or directory". ``base``: the folder a relative path is in (a spec's file
    fields: hetinfra.spec.files), else the working directory."""
    path = _expanded(what, value, None, hint)
    if base is not None and not path.is_absolute():
        path = base / path
    problem = path_problem(path)
    if problem:
        raise InvalidInputError(f"{what} {_clipped(str(path))!r}: {problem}", hint=hint)
    return path
