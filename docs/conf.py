"""Sphinx configuration of numba-shmem's documentation site.

Build, with the project installed (the README's ``.venv``): ``python -m sphinx
-W -b html docs build/docs`` (warnings are errors, so a name the docs reference
that the code no longer has fails the build; ``tests/test_docs.py`` runs it).
The API reference is autodoc over the public namespace, imported as users
import it (the installed package, with the launcher's ``shmem_run`` it
imports): most public names are made from tables at import time, which a static
reader would not see. Markdown pages through MyST, so the same files read well
on GitHub.
"""

import os

os.environ.setdefault("NUMBA_SHMEM_BACKEND", "sim")  # no GPU is needed to build

project = "numba-shmem"
author = "the numba-shmem developers"
copyright = "2026, the numba-shmem developers"  # noqa: A001  (Sphinx's name)
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "*.json"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "imported-members": True}
html_theme = "alabaster"
html_static_path = []
suppress_warnings = ["myst.xref_missing"]  # a page's link to a source file of the repository
