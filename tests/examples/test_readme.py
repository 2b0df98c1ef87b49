"""Every Python snippet in README.md runs as written (issue 15), in a fresh process."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SNIPPETS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_snippets():
    assert len(SNIPPETS) >= 4


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_snippet_runs(index, tmp_path):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.run(
        [sys.executable, "-c", SNIPPETS[index]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"README snippet {index} failed:\n{SNIPPETS[index]}\n{proc.stderr[-2000:]}"
    )
    for line in SNIPPETS[index].splitlines():  # `print(...)  # value` comments hold
        m = re.match(r"print\((.*)\)\s+# (tensor\(.*\)|\(\d.*\))$", line.strip())
        if m:
            assert m.group(2) in proc.stdout, (line, proc.stdout)
