"""tracegrad/config.py: one parsing rule for every TRACEGRAD_* variable (issue 15).

Before it, TRACEGRAD_PARALLEL=true and TRACEGRAD_EAGER_NUMBA=false did the
opposite of what they say.
"""

import pathlib
import re

import pytest

from tracegrad import config


@pytest.mark.parametrize(
    "value,expected",
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
        ("", True),
    ],
)
def test_switches_parse_one_way(monkeypatch, value, expected):
    monkeypatch.setenv("TRACEGRAD_EAGER_NUMBA", value)
    assert config.eager_numba() is expected
    monkeypatch.setenv("TRACEGRAD_MALLOC_TUNING", value)
    assert config.malloc_tuning() is expected


def test_eager_numba_false_turns_the_numba_path_off(monkeypatch):
    """Was: any value but '0' kept it on."""
    from tracegrad.runtime import eager_math

    monkeypatch.setenv("TRACEGRAD_EAGER_NUMBA", "false")
    assert not eager_math.enabled()


@pytest.mark.parametrize(
    "value,mode",
    [
        ("true", "background"),
        ("1", "background"),
        ("", "background"),
        ("sync", "sync"),
        ("false", "0"),
        ("0", "0"),
        ("no", "0"),
    ],
)
def test_parallel_mode(monkeypatch, value, mode):
    """Was: TRACEGRAD_PARALLEL=true gave mode 'true', which built no parallel variant."""
    from tracegrad.codegen import parallel_mode

    monkeypatch.setenv("TRACEGRAD_PARALLEL", value)
    assert parallel_mode() == mode


def test_unknown_value_warns_and_keeps_the_default(monkeypatch):
    config._warned.discard("TRACEGRAD_LOG")
    monkeypatch.setenv("TRACEGRAD_LOG", "loud")
    with pytest.warns(RuntimeWarning, match="TRACEGRAD_LOG='loud'"):
        assert config.log_enabled() is False


def test_docs_list_every_variable_and_no_module_reads_the_environment_itself():
    root = pathlib.Path(__file__).resolve().parents[2]
    page = (root / "docs" / "src" / "configuration.md").read_text()  # README links to it
    for name in config.VARIABLES:
        assert f"`{name}`" in page, name
    for path in (root / "tracegrad").rglob("*.py"):
        if path.name == "config.py":
            continue
        text = path.read_text()
        assert not re.search(r"environ(\.get)?\(?\[?\s*[\"']TRACEGRAD_", text), path
