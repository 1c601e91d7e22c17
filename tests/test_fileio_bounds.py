"""The one reader's bounds (JSON nesting, the header test of a headerless CSV) and the out-dir swap's
guards: no copy left beside OUT after a signal or a kill, no OUT that holds the cwd or the spec,
a symlinked OUT written through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from hetinfra.errors import InvalidInputError
from hetinfra.fileio import MAX_JSON_DEPTH, json_depth, parse_json, read_json
from hetinfra.outdir import staged_dir
from hetinfra.csvtext import looks_like_header

REPO = Path(__file__).resolve().parents[1]


def _nest(depth: int, kind: str = "[]") -> str:
    return kind[0] * depth + kind[1] * depth


@pytest.mark.parametrize("text", [_nest(MAX_JSON_DEPTH + 1), _nest(200_000), _nest(5000, "{}").replace("{{", '{"a":{'),
                                  "[" * 1_000_000])
def test_deep_json_is_a_clear_error_never_a_recursion_error(text):
    with pytest.raises(InvalidInputError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        parse_json(text, "x.json")


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{"', max_size=3),
                                                                               inner, max_size=3), max_leaves=30))
def test_property_json_depth_is_the_nesting_of_arrays_and_objects(value):
    def depth(v):
        children = list(v.values()) if isinstance(v, dict) else v if isinstance(v, list) else None
        return 0 if children is None else 1 + max(map(depth, children), default=0)

    assert json_depth(json.dumps(value)) == depth(value)  # brackets inside strings do not count


@pytest.mark.parametrize("text", ['{"a": "' + '\\"' * 2_000_000, '["' + "\\" * 10 + "\n" * 3, '[[["' + "x" * 100])
def test_an_unterminated_string_is_refused_in_one_pass(text):
    """The nesting scan ran from every quote of an unterminated string to the end of the text, again and
    again: 200 KB of \\" pairs kept `hetinfra simulate` busy for minutes (4 MB here: hours). An alarm
    stops a scan that is not linear; the refusal is json.loads', naming the line."""
    import signal

    def stop(*_):
        raise TimeoutError("the JSON pre-scan is not linear")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    try:
        with pytest.raises(InvalidInputError, match="x.json:1"):
            parse_json(text, "x.json")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_file_write_never_replaces_a_fifo_a_device_or_a_folder(tmp_path):
    """atomic_write_text (every file we write: profile-import --out, simulation.json, state) renamed its
    temporary file over whatever the path named: `--out /dev/full` replaced the device node."""
    from hetinfra.fileio import atomic_write_text

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to("/dev/null")
    for path, kind in ((fifo, "a FIFO"), (tmp_path / "folder", "a folder"), (tmp_path / "link", "a device")):
        with pytest.raises(InvalidInputError, match=f"is {kind}, not a regular file"):
            atomic_write_text(path, "x")
    assert fifo.exists() and not fifo.is_file() and (tmp_path / "folder").is_dir()
    regular = tmp_path / "file.csv"
    regular.write_text("old")
    atomic_write_text(regular, "new")
    assert regular.read_text() == "new"


def test_strict_json_refuses_nan_and_names_line_and_column(tmp_path):
    with pytest.raises(InvalidInputError, match="NaN is not a JSON number"):
        parse_json('{"a": NaN}', "x.json")
    assert parse_json('{"a": NaN}', "x.json", allow_nan=True)["a"] != 0
    with pytest.raises(InvalidInputError, match=r"x.json:2:\d+: not valid JSON"):
        parse_json('{\n"a": }', "x.json")
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInputError, match="not a regular file"):
        read_json(fifo)  # never opened: opening a FIFO with no writer blocks


@pytest.mark.parametrize("row, header", [(["input_tokens", "output_tokens"], True), (["512", "128"], False),
                                         (["512.0", "128"], False), (["1e3", "64"], False), ([" 7 ", "8"], False),
                                         (["abc", "128"], False), (["", ""], False)])
def test_a_first_row_of_numbers_is_never_a_header(row, header):
    assert looks_like_header(row) is header


def test_an_out_dir_that_holds_the_cwd_is_refused_one_that_holds_the_spec_keeps_it(tmp_path, monkeypatch):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    for cwd in (out, out / "sub"):
        monkeypatch.chdir(cwd)
        for target in (Path("."), out, Path("..") if cwd != out else Path(".")):
            with pytest.raises(InvalidInputError, match="current directory or holds it"):
                with staged_dir(target):
                    pass
    monkeypatch.chdir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging copy left
    (out / "spec.yaml").write_text("name: x\n")
    with staged_dir(out) as stage:
        (stage / "plan.json").write_text("{}")
    assert (out / "spec.yaml").read_text() == "name: x\n" and (out / "plan.json").exists()


def test_a_symlinked_out_dir_is_written_through(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "old.txt").write_text("old")
    link = tmp_path / "link"
    link.symlink_to(real)
    with staged_dir(link) as stage:
        (stage / "new.txt").write_text("new")
    assert link.is_symlink() and link.resolve() == real  # the link stays; its folder was replaced
    assert sorted(p.name for p in real.iterdir()) == ["new.txt", "old.txt"]
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(InvalidInputError, match="symlink to nothing"):
        with staged_dir(tmp_path / "dangling"):
            pass


def test_a_copy_left_by_a_killed_run_is_removed_by_the_next(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = tmp_path / f".out.new.{dead.stdout.strip()}.abc"
    (leftover / "x").mkdir(parents=True)
    mine = tmp_path / f".out.new.{os.getpid()}.abc"
    mine.mkdir()
    with staged_dir(out):
        pass
    assert not leftover.exists() and mine.exists()  # a live process's copy is never touched


def test_plan_json_and_a_snapshot_meta_nested_too_deep_are_clear_errors(tmp_path):
    from hetinfra.document.load import read_json as read_document
    from hetinfra.price_feeds.store import CorruptSnapshot, read_snapshot_dir

    deep = tmp_path / "plan.json"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(InvalidInputError, match="nested deeper than"):
        read_document(deep, what="plan.json", hint="re-plan")
    snap = tmp_path / "snap"
    snap.mkdir()
    os.mkfifo(snap / "meta.json")
    with pytest.raises(CorruptSnapshot, match="not a regular file"):
        read_snapshot_dir(snap)


@settings(max_examples=40, deadline=None)
@given(key=st.text(min_size=1, max_size=12), first=st.integers(), second=st.integers(),
       depth=st.integers(min_value=0, max_value=3))
def test_a_key_given_twice_in_one_object_is_refused_naming_it(key, first, second, depth):
    """Every JSON file hetinfra reads goes through parse_json, which refuses an object naming one key
    twice (json.loads keeps the last silently: a config.json with two num_attention_heads planned on
    the second), at any depth; the same keys in two different objects are fine."""
    k = json.dumps(key)
    doc = f'{{{k}: {first}, {k}: {second}}}'
    for _ in range(depth):
        doc = f'{{"outer": [{doc}]}}'
    with pytest.raises(InvalidInputError, match="appears twice in one object"):
        parse_json(doc, "c.json")
    assert parse_json(f'[{{{k}: {first}}}, {{{k}: {second}}}]', "c.json") == [{key: first}, {key: second}]
