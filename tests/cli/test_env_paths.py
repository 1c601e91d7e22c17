"""Paths from the environment are checked where they are read (hetinfra.envpaths), as path flags
are: a value no file can have (a name over 255 bytes, in any place of the path) is exit 2 naming the
variable, never a traceback (`feeds list` and `prices --feeds cache` raised OSError from Path.is_dir)
nor "malformed feed data" (exit 4, `feeds refresh` with such a catalog). And `feeds refresh`, whose
job is to store what it fetched, fails when the store cannot be written (it exited 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetinfra.cli.app import cli
from hetinfra.errors import InvalidInputError

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.xdist_group("env_paths")

CATALOG = "tests/tools/data/catalog-v8"
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

#: a path no file can have: one of its names is over 255 bytes (ASCII or multi-byte UTF-8)
TOO_LONG = st.builds(lambda head, ch, n, tail: f"{head}{ch * n}{tail}",
                     st.sampled_from(["", "/tmp/", "~/", "rel/"]), st.sampled_from(["y", "é", "字"]),
                     st.integers(256, 400), st.sampled_from(["", "/x", "/"]))


def _readers():
    """variable -> the function that reads it (each reads the environment when called)."""
    from hetinfra.catalog.hf import hub_cache_dir
    from hetinfra.deploy.pulumi_driver import _home
    from hetinfra.plan.template_cache import default_dir
    from hetinfra.price_feeds.config import FeedConfig, default_cache_dir, default_skypilot_catalog

    return {"HETINFRA_CACHE_DIR": [default_cache_dir, default_dir], "HOME": [_home, default_cache_dir],
            "XDG_CACHE_HOME": [default_dir, hub_cache_dir], "HF_HOME": [hub_cache_dir],
            "HF_HUB_CACHE": [hub_cache_dir], "SKY_RUNTIME_DIR": [default_skypilot_catalog],
            "HETINFRA_SKYPILOT_CATALOG": [FeedConfig.from_env]}


@pytest.mark.parametrize("var", ["HETINFRA_CACHE_DIR", "HOME", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE",
                                 "SKY_RUNTIME_DIR", "HETINFRA_SKYPILOT_CATALOG"])
@SETTINGS
@given(value=TOO_LONG)
def test_every_reader_of_a_path_variable_refuses_a_path_no_file_can_have(monkeypatch, var, value):
    for name in ("HETINFRA_CACHE_DIR", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, value)
    for reader in _readers()[var]:
        with pytest.raises(InvalidInputError) as refused:
            reader()
        assert refused.value.message.startswith(f"{var}='") and "File name too long" in refused.value.message


@pytest.mark.parametrize("var, args", [
    ("HETINFRA_CACHE_DIR", ["feeds", "list"]),
    ("HETINFRA_CACHE_DIR", ["prices", "--feeds", "cache", "--limit", "1"]),
    ("HOME", ["feeds", "list", "--json"]),
    ("HETINFRA_SKYPILOT_CATALOG", ["feeds", "refresh", "--source", "skypilot"]),
])
@SETTINGS
@given(value=TOO_LONG)
def test_the_commands_say_which_variable(tmp_path, monkeypatch, var, args, value):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    if var != "HETINFRA_CACHE_DIR":
        monkeypatch.setenv("HETINFRA_CACHE_DIR", str(tmp_path / "cache"))
    else:
        monkeypatch.delenv("HETINFRA_CACHE_DIR", raising=False)
    result = CliRunner().invoke(cli, args, env={var: value})
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"error: {var}='" in result.output


def test_refresh_fails_when_it_cannot_store_what_it_fetched(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    store = blocker / "store"  # a folder that cannot be made (the variable naming a file is refused sooner)
    monkeypatch.setenv("HETINFRA_CACHE_DIR", str(store))
    monkeypatch.setenv("HETINFRA_SKYPILOT_CATALOG", CATALOG)
    result = CliRunner().invoke(cli, ["feeds", "refresh", "--source", "skypilot", "--json"])
    assert result.exit_code == 2, result.output
    assert f"skypilot: fetched, but could not write the snapshot store {store}: Not a directory" in result.output


#: a value of a folder variable that names no folder the same from every directory: relative, or a
#: ``~user`` of no user of this machine, or (for HOME) ``~`` itself
NOT_ROOTED = st.one_of(
    st.from_regex(r"[A-Za-z0-9._-][A-Za-z0-9._/-]{0,30}", fullmatch=True),
    st.from_regex(r"~zz[a-z0-9]{4,10}(/[a-z0-9]{1,8}){0,2}", fullmatch=True),
    st.sampled_from(["~", "~/", ".", "off", "OFF", "0", "none"]))


@pytest.mark.parametrize("var", ["HETINFRA_CACHE_DIR", "HOME", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE",
                                 "SKY_RUNTIME_DIR"])
@SETTINGS
@given(value=NOT_ROOTED)
def test_a_folder_variable_is_expanded_ignored_taken_or_refused_by_its_rule(monkeypatch, var, value):
    """HOME='~' and a ``~nobody/x`` in any of them were a RuntimeError traceback (pathlib's expanduser): now
    exit 2 naming the variable; a ``~/x`` is the checked home's. A relative HOME is refused (it names
    another home in every directory). A relative XDG_CACHE_HOME is ignored, as the XDG rules say (the
    default under HOME applies; refusing it stopped every `plan` of a CI job with XDG_CACHE_HOME=.cache),
    and the other folder variables are taken as given, relative to the working directory, as
    huggingface_hub and SkyPilot read theirs (a CI job's HF_HOME=.cache/hf found its models again)."""
    for name in ("HETINFRA_CACHE_DIR", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv(var, value)
    for reader in _readers()[var]:
        if value in ("~", "~/") and var != "HOME":
            assert str(reader()).startswith("/home/someone")  # the home, checked
            continue
        if var == "HETINFRA_CACHE_DIR" and value.lower() in ("off", "0", "none"):
            # the template cache switched off, as documented; the price store keeps its default folder
            # (it was a folder 'off' in whatever directory the command ran from)
            expected = None if reader.__name__ == "default_dir" else Path("/home/someone/.cache/hetinfra/feeds")
            assert reader() == expected
            continue
        if value.startswith("~") or var == "HOME":  # a ~user of no user, or a HOME that is not absolute
            with pytest.raises(InvalidInputError) as refused:
                reader()
            assert refused.value.message.startswith(f"{var}='")
            continue
        got = reader()
        if var == "XDG_CACHE_HOME":  # ignored: the default under HOME
            assert str(got).startswith("/home/someone/.cache/"), got
        else:  # taken as given (a reader may find nothing there: None)
            assert got is None or not Path(got).is_absolute(), got


def test_a_user_without_home_is_told_to_set_it(monkeypatch):
    """No HOME and no password database entry (a container run as an arbitrary uid): pathlib raised
    RuntimeError ("Could not determine home directory")."""
    import pwd

    from hetinfra.price_feeds.config import default_cache_dir

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME")
    monkeypatch.delenv("HETINFRA_CACHE_DIR", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(InvalidInputError, match="HOME is not set and the password database has no user"):
        default_cache_dir()


@pytest.mark.parametrize("home", [None, "", "  "])
@pytest.mark.parametrize("xdg", [None, "relative/cache"])
def test_a_user_without_home_plans_without_the_template_cache(tmp_path, monkeypatch, run_cli, xdg, home):
    """No HOME and no password database entry: `plan` stopped on "HOME is not set" though the template
    cache it wanted the home for only saves time; it now plans without it (a relative XDG_CACHE_HOME is
    ignored, as the XDG rules say). A HOME set to a wrong value is still refused."""
    import pwd

    from hetinfra.envpaths import homeless
    from hetinfra.plan.template_cache import default_dir

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME")
    if home is not None:  # blank: unset, as every reader of HOME takes it
        monkeypatch.setenv("HOME", home)
    monkeypatch.delenv("HETINFRA_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    if xdg:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert homeless() and default_dir() is None
    if xdg is None:  # the whole command, once per HOME
        code, stdout, err = run_cli("plan", str(REPO / "services/chat.yaml"), "--out", str(tmp_path / "out"),
                                    "--no-verify")
        assert code == 0, err
        assert (tmp_path / "out" / "plan.json").is_file()
    monkeypatch.setenv("HOME", "relative/home")
    assert not homeless()
    with pytest.raises(InvalidInputError, match="HOME"):
        default_dir()


@pytest.mark.parametrize("var", ["HETINFRA_CACHE_DIR", "HOME", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE"])
def test_a_folder_variable_that_names_a_file_is_refused_naming_it(monkeypatch, tmp_path, var):
    """Each of these variables names a folder (envpaths.env_path): a regular file there was read as an empty
    store (`feeds list`: "no snapshots in <the file>") or a cache that could never be written."""
    for name in ("HETINFRA_CACHE_DIR", "XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    afile = tmp_path / "a-file"
    afile.write_text("not a folder\n")
    monkeypatch.setenv(var, str(afile))
    for reader in _readers()[var]:
        with pytest.raises(InvalidInputError) as refused:
            reader()
        msg = refused.value.message  # the value is clipped where long (envpaths._clipped)
        assert msg.startswith(f"{var}='") and msg.endswith("': is a file, not a folder"), msg


def test_feeds_list_with_a_cache_variable_that_names_a_file_is_exit_2(monkeypatch, tmp_path):
    afile = tmp_path / "cache"
    afile.write_text("")
    monkeypatch.setenv("HETINFRA_CACHE_DIR", str(afile))
    result = CliRunner().invoke(cli, ["feeds", "list"])
    assert result.exit_code == 2 and "HETINFRA_CACHE_DIR" in result.output and "is a file, not a folder" in result.output
