"""The README's install as a stranger does it: `python3 -m venv` and `pip install .` with the pip that
Python ships (no upgrade). `full_text` needs lxml_html_clean, which trafilatura's justext asks for as
`lxml[html_clean]`, an extra the pip of Python 3.11 (23.2) does not match (lxml's metadata spells it
html-clean): the project must depend on it by name. Installs from the package registry into a fresh
venv: a few minutes."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
PROJECT_FILES = ("pyproject.toml", "README.md", "parser", "db", "linkgen")


def test_a_stock_pip_install_can_import_what_full_text_needs(tmp_path):
    # A copy of the project: pip builds in the source folder, and the working tree is not ours to litter.
    src = tmp_path / "src"
    src.mkdir()
    for name in PROJECT_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True, check=True)
    installed = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", str(src)],
                               capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    assert installed.returncode == 0, f"{pip.stdout}{installed.stdout[-3000:]}{installed.stderr[-3000:]}"
    # What trafilatura imports on a page (lxml.html.clean is a shell over lxml_html_clean), then a page's
    # main text as full_text takes it, from the installed package (cwd is not the source folder).
    script = ("import lxml_html_clean, lxml.html.clean, trafilatura\n"
              "from parser.pipeline import fulltext\n"
              "html = '<html><body><article><p>' + 'The whole story, told at length. ' * 20 + '</p></article>'"
              "'</body></html>'\n"
              "print(trafilatura.extract(html, output_format='html') is not None)\n")
    ran = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.strip() == "True", f"{pip.stdout}{ran.stdout}{ran.stderr[-2000:]}"
