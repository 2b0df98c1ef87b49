"""One version (issue 27): pyproject.toml's, read from the package metadata by
tracegrad.__version__ (and config.VERSION, which salts the kernel cache), with a
fallback for a source tree pip never installed; CHANGELOG.md's latest release."""

import doctest
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import tracegrad as tg
from tracegrad import config

ROOT = Path(__file__).resolve().parents[2]


def pyproject_version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^version = "([^"]+)"', text, re.M).group(1)


def test_the_fallback_and_the_changelog_follow_pyproject():
    version = pyproject_version()
    assert config._FALLBACK_VERSION == version
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.M)
    assert released and released[0] == version, released[:3]


def test_version_comes_from_the_package_metadata():
    assert tg.__version__ == config.VERSION == config.version()
    try:
        installed = importlib.metadata.version("tracegrad")
    except importlib.metadata.PackageNotFoundError:
        installed = config._FALLBACK_VERSION
    assert tg.__version__ == installed


def test_without_metadata_the_fallback_is_used(monkeypatch):
    def not_found(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_found)
    config.version.cache_clear()
    try:
        assert config.version() == config._FALLBACK_VERSION
    finally:
        monkeypatch.undo()
        config.version.cache_clear()


def test_importing_tracegrad_does_not_read_the_metadata():
    # importlib.metadata costs tens of ms: __version__ looks it up on first use only
    code = "import sys, tracegrad; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_config_docstring_examples():
    assert doctest.testmod(config).failed == 0
