"""The documentation site (issue 27): every Python snippet in docs/src/*.md runs as
written, in a fresh process, as README.md's do (tests/examples/test_readme.py; snippets
the README also holds run there only), and its `print(...)  # value` comments hold.
The site itself is built by CI (`mkdocs build --strict -d docs/_build/html`)."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "src").glob("*.md"))
README = set(re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S))
SNIPPETS = [
    (page.name, k, code)
    for page in PAGES
    for k, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
    if code not in README
]


def test_the_pages_of_the_issue_exist():
    names = {page.name for page in PAGES}
    for page in (
        "getting-started.md",
        "eager.md",
        "compiled.md",
        "loops.md",
        "forward-vmap.md",
        "custom-rules.md",
        "distributed.md",
        "cache.md",
        "performance.md",
    ):
        assert page in names, page
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in names:
        assert page in nav, f"docs/src/{page} is not in mkdocs.yml's nav"


@pytest.mark.parametrize("page,index,code", SNIPPETS, ids=[f"{p}-{k}" for p, k, _ in SNIPPETS])
def test_docs_snippet_runs(page, index, code, tmp_path):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    env.setdefault("TRACEGRAD_BACKEND", "interpret")  # the numba pass sets it to numba
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{page} snippet {index} failed:\n{code}\n{proc.stderr[-2000:]}"
    for line in code.splitlines():  # `print(...)  # value` comments hold
        m = re.match(r"print\((.*)\)\s+# ((True|False|tensor\(|\(\d|\[).*)$", line.strip())
        if m:  # a value (words after it, in parentheses, explain it)
            assert m.group(2).split(" (")[0] in proc.stdout, (line, proc.stdout)
