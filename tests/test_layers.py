"""The import structure holds its contracts (``[tool.importlinter]`` in
pyproject.toml): the library's layers import only downward, the launcher's
too and none of the library, and no package's modules import each other in a
circle."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def test_the_layers_import_downward_only_and_in_no_circle():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():  # (the test extra installs it)
        pytest.skip(f"import-linter is not installed beside {sys.executable}")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout, result.stdout
