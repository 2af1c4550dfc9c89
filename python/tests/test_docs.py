"""Every ```pycon block of the README and docs/python.md runs as written, from the root
of the repository, and prints what it shows (doctest). The blocks of one file share one
namespace, in order, as a reader follows the page in one interpreter."""

from __future__ import annotations

import doctest
import re

import pytest

from conftest import REPO

PAGES = ["README.md", "docs/python.md"]


def pycon_blocks(text: str):
    """(line, block text) of every ```pycon block."""
    for m in re.finditer(r"^```pycon\n(.*?)^```", text, flags=re.S | re.M):
        yield text[: m.start()].count("\n") + 2, m.group(1)


@pytest.mark.parametrize("page", PAGES)
def test_pycon_blocks_run_as_shown(page, monkeypatch):
    monkeypatch.chdir(REPO)
    text = (REPO / page).read_text()
    blocks = list(pycon_blocks(text))
    assert blocks, f"{page} shows no pycon block"
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    globs: dict = {}
    for line, block in blocks:
        test = parser.get_doctest(block, globs, f"{page}:{line}", str(REPO / page), line - 1)
        runner.run(test, clear_globs=False)
        globs = test.globs  # a DocTest runs in a copy: carry its names to the next block
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {page} failed (see the output above)"
