"""The documentation site builds with warnings as errors (``docs/conf.py``),
its API reference documents every public name once, and the user's pages
(the README and the guide) name no function the library does not have."""

import re
import subprocess
import sys

import numba_shmem
import pytest
from conftest import ROOT

#: backticked names in the user's pages that look like the library's calls
_CALL = re.compile(r"`((?:put|get|iput|iget|atomic_|signal_|wait_until|test_|barrier|sync|fence"
                   r"|quiet|broadcast|fcollect|alltoall|team_|peer_|collective_|cupy_"
                   r"|(?:sum|prod|min|max|and|or|xor)_reduce)[A-Za-z_0-9]*)(?:\(|`)")
USER_PAGES = ["README.md", "docs/index.md", "docs/launching.md", "docs/memory-model.md",
              "docs/collectives.md", "docs/streams.md", "docs/interop.md", "docs/debugging.md",
              "docs/failures.md"]


def test_the_site_builds_without_warnings_and_documents_every_public_name(tmp_path):
    pytest.importorskip("sphinx.cmd.build", reason="Sphinx is not installed (the test extra installs it)")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                             "html", str(ROOT / "docs"), str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    html = (tmp_path / "reference.html").read_text()
    documented = re.findall(r'id="numba_shmem\.([A-Za-z_0-9]+)"', html)
    assert sorted(documented) == sorted(numba_shmem.__all__)


def test_the_users_pages_name_only_functions_that_exist():
    for page in USER_PAGES:
        text = (ROOT / page).read_text()
        named = set(re.findall(r"\bshmem\.([A-Za-z_][A-Za-z_0-9]*)", text))
        named |= set(_CALL.findall(text))
        missing = sorted(name for name in named if not hasattr(numba_shmem, name))
        assert not missing, (page, missing)
