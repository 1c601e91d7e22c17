"""What every command shares: how a HetinfraError becomes the exit code and the message (the one
place errors are turned into output; see hetinfra.errors for the classes and their codes), and the
``--json`` contract: one JSON document on stdout, nothing else there."""

from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Callable, TypeVar

import click

from hetinfra.errors import HetinfraError, InvalidInputError, shown
from hetinfra.fileio import dumps_strict

T = TypeVar("T")

#: every command's help options, declared by the command itself (``context_settings=COMMAND_SETTINGS``),
#: not only inherited from the group: click keeps a command's help option from its first use, so a
#: command first invoked alone (a test's CliRunner, before hetinfra.cli.app was imported) answered only
#: --help from then on, and the generated CLI reference depended on which test ran first
HELP_OPTIONS = ("-h", "--help")
COMMAND_SETTINGS = MappingProxyType({"help_option_names": HELP_OPTIONS})  # shared by every command: read-only


class UserPath(click.Path):
    """click.Path that refuses an empty string, which click reads as the current directory (`--state ''`
    re-planned against whatever the shell's folder held), and a path no file can have
    (hetinfra.envpaths.path_problem: a name over 255 bytes was a traceback in plan --out, status,
    apply, destroy, replan --state, where Path.exists raised on it): the one type of every path flag
    and argument. ``-`` is refused too (click takes it as a name where ``allow_dash`` is not set, and no
    flag sets it: `plan --out -` made a folder named ``-``, `profile-import --out -` a file named so). A
    file that must exist (``exists=True``, no folder) is a regular file or a link to one:
    `gateway --tls-cert FIFO` hung before serving (OpenSSL opens the file itself and waited for a writer),
    and a device such as /dev/zero was read as a certificate."""

    def convert(self, value, param, ctx):
        from hetinfra.envpaths import path_problem

        if isinstance(value, (str, bytes)) and not (value.decode() if isinstance(value, bytes) else value).strip():
            self.fail("is empty: give a path", param, ctx)
        if value in ("-", b"-") and not self.allow_dash:  # click reads '-' as a name: `plan --out -` made a folder '-'
            self.fail(f"'-' is not standard input or output here but a path; write ./- for a "
                      f"{'folder' if not self.file_okay else 'file'} named '-'", param, ctx)
        name = click.format_filename(value)
        problem = path_problem(value)  # before click's own checks: it calls a symlink loop "does not exist"
        if problem:
            self.fail(problem if "NUL" in problem else f"{name if len(name) <= 60 else name[:57] + '...'}: {problem}",
                      param, ctx)
        path = super().convert(value, param, ctx)
        if self.exists and not self.dir_okay:
            import os
            import stat

            from hetinfra.fileio import kind_of

            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                self.fail(f"{name if len(name) <= 60 else name[:57] + '...'} is {kind_of(mode)}, not a regular file",
                          param, ctx)
        return path


class OutDir(UserPath):
    """An OUT directory a command reads (`hetinfra plan --out` wrote it): the one type of every such
    argument and flag. A path that does not exist is invalid input (exit 2), with what to give instead:
    a command that read it as "nothing here" (`status`: "nothing deployed", exit 0) hid a mistyped
    path. A directory without state.json is still a plan's folder, not deployed yet."""

    def __init__(self):
        super().__init__(file_okay=False, path_type=Path)  # click says "is a file" of a file

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        if not path.exists():
            self.fail(f"{value}: no such directory; give the folder that `hetinfra plan SPEC --out DIR` wrote",
                      param, ctx)
        return path


#: the largest values numeric flags take: every number flag states an upper bound (tests/cli/
#: test_number_flags.py holds every command to it). Without one, `gateway --demand-log-keep 10**20`
#: hung the gateway at its first rotation and at GET /admin/demand.csv. Each bound is the one of the
#: file or spec field the flag feeds, where there is one (a test keeps them equal):
MAX_TOKENS = 10_000_000  # a request's tokens (spec classes, profiles, datasets, demand logs)
MAX_PARALLEL = 1024  # tp, pp (a profile row's)
MAX_TTFT_MS, MAX_TPOT_MS = 3_600_000, 600_000  # the spec's slo bounds
MAX_WAIT_S = 7 * 86_400  # a timeout or interval: a week
MAX_HOURS = 100 * 8_760  # an age in hours: a century
MAX_PCT = 1_000_000.0  # a percentage threshold that may exceed 100 (a forecast's error)
MAX_COUNT = 1_000_000  # a count of things listed, prompts, changes or periods
MAX_ROTATIONS = 1000  # a demand log's rotations kept (each rotation renames them one by one)
MAX_BUDGET_USD_H = 10_000_000  # $/h, the spec's budget bound
MAX_RATE_RPS = 1_000_000  # req/s, the spec's rate_rps bound


class FiniteFloat(click.FloatRange):
    """click's FloatRange that also refuses nan and +-inf (NaN compares false with every bound, so
    FloatRange alone lets it through): the one number type of every float flag. Default: any finite."""

    name = "number"

    def __init__(self, min: float | None = None, max: float | None = None, **kwargs):  # noqa: A002
        super().__init__(min=min, max=max, **kwargs)

    def _describe_range(self) -> str:
        """The range as help text: click's, except that a range with no bound (any finite number) has
        none to show, where click's would print ``x<=None``."""
        return "" if self.min is None and self.max is None else super()._describe_range()

    def convert(self, value, param, ctx):
        as_written(self, value, param, ctx)
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class WholeRange(click.IntRange):
    """click's IntRange that takes a whole number as a CSV or the spec writes one (:func:`as_written`): the
    one type of every integer flag."""

    def convert(self, value, param, ctx):
        as_written(self, value, param, ctx)
        return super().convert(value, param, ctx)


def as_written(kind: click.ParamType, value, param, ctx) -> None:
    """Refuse ``value`` (a number flag's text) unless it writes its number in ASCII digits as a CSV cell
    does (hetinfra.csvtext.PLAIN_NUMBER; a whole number: digits and a sign): int() and float() also read
    '1_0' as 10, Unicode digits ('٣', '１２') and surrounding spaces, which the spec and every CSV reader
    refuse. A text float() reads as nan or an infinity is left to the finite check, which names it."""
    from hetinfra.csvtext import is_plain_number, whole_number

    if not isinstance(value, str):
        return
    if isinstance(kind, click.types.IntParamType):
        if whole_number(value[1:] if value[:1] in "+-" else value) is None:
            kind.fail(f"{value[:40]!r} is not a whole number in ASCII digits (such as 10)", param, ctx)
        return
    try:
        non_finite = not math.isfinite(float(value))
    except ValueError:
        non_finite = False
    if not (is_plain_number(value) or non_finite):
        kind.fail(f"{value[:40]!r} is not a number in ASCII digits (such as 2.5 or 1e3)", param, ctx)


#: the escape sequences Rich writes to style a table on a terminal (SGR: colour, bold, dim), kept on one
_SGR = re.compile(r"(\x1b\[[0-9;]*m)")


def printable(text: str, terminal: bool) -> str:
    """``text`` with every character that does not print (ESC, BEL, a carriage return, a bidi override)
    but a newline written as its escape (hetinfra.errors.shown), except on a ``terminal`` the SGR
    sequences that style Rich's tables."""
    if text.isprintable() or "\x1b" not in text and all(ch.isprintable() or ch == "\n" for ch in text):
        return text
    if not terminal:
        return shown(text)
    return "".join(part if i % 2 else shown(part) for i, part in enumerate(_SGR.split(text)))


class PrintableStdout(io.TextIOWrapper):
    """stdout as a terminal may show it (:func:`printable`): every line a command prints, whatever printed
    it (click.echo, a Rich console, print)."""

    def write(self, text: str) -> int:
        super().write(printable(text, self.terminal))
        return len(text)


def printable_stdout() -> None:
    """stdout written through :class:`PrintableStdout`. Errors and warnings (stderr) go through
    hetinfra.errors.shown where they are made; the lines on stdout quote paths and names a user or a file
    gave, and wrote them as they were: `plan --out $'O\\e]0;x\\a'` set the terminal's title with
    "wrote O...", as did `simulate`, `status`, `replan` and `feeds list` (HETINFRA_CACHE_DIR's folder)."""
    out = sys.stdout
    if out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper) or isinstance(out, PrintableStdout):
        return  # a test runner's capture (CliRunner's own wrapper), no stdout (`>&-`), or installed already
    try:
        out.flush()
        terminal = out.isatty()
        errors = "backslashreplace" if out.errors in ("strict", "surrogateescape") else out.errors
        kept = {"encoding": out.encoding, "errors": errors, "line_buffering": out.line_buffering,
                "write_through": out.write_through}
        wrapped = PrintableStdout(out.detach(), **kept)
    except (OSError, ValueError):  # a closed descriptor: its first write says so (hetinfra.cli.stops)
        return
    wrapped.terminal = terminal
    sys.stdout = wrapped


def encodable_outputs() -> None:
    """stdout and stderr write a character their encoding lacks as its escape (``\\xe9``) instead of
    raising: under an ASCII locale (``PYTHONIOENCODING=ascii``, a CI job's ``LANG=C`` on an old
    interpreter) `hetinfra plan` ended in a UnicodeEncodeError traceback at the summary's "Mélange", and
    so did any table holding text a user wrote (an offers ``source`` of 'café-list' in `prices`). Python
    itself does this for stderr only (under the C locale it gives stdout surrogateescape, which raises on
    them too). ``--json`` output is ASCII already (json.dumps escapes)."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) in ("strict", "surrogateescape") and callable(
                getattr(stream, "reconfigure", None)):
            try:
                stream.reconfigure(errors="backslashreplace")
            except OSError:  # a closed descriptor: its first write says so (hetinfra.cli.stops)
                pass
    printable_stdout()


def echo_error_document(exc: HetinfraError, partial: dict | None = None) -> None:
    """The ``--json`` error document on stdout: ``partial``, what the command had to report before it
    failed, plus ``{"error": {"type", "exit_code", "message", "hint", ...}, "exit_code": N}``."""
    error = {"type": type(exc).__name__, "exit_code": exc.exit_code, "message": exc.message,
             "hint": exc.hint, **exc.details}
    click.echo(dumps_strict({**(partial or {}), "error": error, "exit_code": exc.exit_code}, indent=2))


def fail(exc: HetinfraError, as_json: bool, partial: dict | None = None) -> None:
    """Print ``exc`` (``error:``/``hint:`` on stderr; with ``as_json`` also the error document on
    stdout, :func:`echo_error_document`) and exit with its code.

    Once a stop signal arrived, an error is what the stop left behind (a solve it cancelled found no
    plan): the command exits as stopped, and says so (hetinfra.cli.app.main), not the error."""
    from hetinfra.cli.stops import STOPPED_BY, stopping

    if stopping:
        sys.exit(STOPPED_BY[stopping[0]])
    def lines() -> None:
        click.echo(shown(f"error: {exc.message}"), err=True)
        if exc.hint:
            click.echo(shown(f"  hint: {exc.hint}"), err=True)

    if as_json:
        _said(lambda: echo_error_document(exc, partial))
    _said(lines)
    sys.exit(exc.exit_code)


def _said(echo: Callable[[], None]) -> None:
    """``echo()``, where the output it writes may fail (stdout or stderr into /dev/full or a full disk):
    the exit code still says what failed. A pipe whose reader left is hetinfra.cli.stops'."""
    try:
        echo()
    except OSError as failed:
        if isinstance(failed, BrokenPipeError):
            raise


def json_usage_error(exc: click.UsageError, args: list[str]) -> None:
    """A flag or argument click refused (exit 2) before the command ran: with ``--json`` among
    ``args`` (the command line after the program's name, up to ``--``) and a command that has
    ``--json``, the same error document :func:`fail` prints (type InvalidInputError), so stdout
    still holds one JSON document. click's own usage text stays on stderr (the caller re-raises)."""
    command = exc.ctx.command if exc.ctx is not None else None
    given = args[:args.index("--")] if "--" in args else args
    if command is None or "--json" not in given or not any(
            "--json" in p.opts for p in command.params if isinstance(p, click.Option)):
        return
    names, ctx = [], exc.ctx
    while ctx.parent is not None:  # the root's own name is argv[0] (a test runner's, python -m's)
        names.append(ctx.info_name)
        ctx = ctx.parent
    path = " ".join(["hetinfra", *reversed(names)])
    echo_error_document(InvalidInputError(exc.format_message(),
                                          hint=f"see '{path} -h' for the options and their values"))


def run_command(as_json: bool, work: Callable[[], T], show: Callable[[T], None] | None = None,
                to_json: Callable[[T], dict] | None = None, partial: dict | None = None) -> T:
    """The tail every command shares: run ``work()``; a HetinfraError exits with its code (see
    :func:`fail`; ``partial`` is the document the command filled in so far); otherwise print the
    result (``to_json(result)``, default the result itself) as the one JSON document on stdout with
    ``as_json``, else ``show(result)``. Returns the result."""
    try:
        result = work()
    except HetinfraError as exc:
        fail(exc, as_json, partial)
        raise  # not reached: fail exits
    if as_json:
        click.echo(dumps_strict(to_json(result) if to_json else result, indent=2))
    elif show is not None:
        show(result)
    return result


def echo_for(as_json: bool) -> Callable[[str], None]:
    """Where a command's progress lines go: stdout, or stderr under ``--json`` (stdout holds only
    the JSON document)."""
    return (lambda text: click.echo(text, err=True)) if as_json else click.echo


def summary_console():
    """A Rich console for a command's tables: the terminal's, or one 132 columns wide for pipes and
    logs, so that tables do not wrap. No highlighting: our tables style their own cells, and Rich's
    highlighter runs its regexes over every string (40% of the plan summary's rendering)."""
    from hetinfra.errors import console

    return console(pipe_width=132, highlight=False)
