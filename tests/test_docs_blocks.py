"""The README's and docs' code as a new user copies it (issue 25): every ``radspatial`` command
in a bash block parses with the real CLI (commands and options exist as written), every Python
block names only what it imports or defines, and the Python blocks that need no GPU, network
or long run are executed. A block that cannot run here says so in the doc, on the line before
its fence: ``<!-- docs-test: skip (why) -->``. docs/python_api.md is run by test_python_api."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from radspatial.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SKIP = re.compile(r"<!-- docs-test: skip \((?P<why>[^)]+)\) -->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")


def _blocks(doc: Path) -> list[tuple[str, str, str | None, int]]:
    """(language, code, skip reason or None, line) of each fenced block."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out, k = [], 0
    while k < len(lines):
        m = FENCE.match(lines[k])
        if not m or not m[1]:
            k += 1
            continue
        start, body = k, []
        k += 1
        while k < len(lines) and not lines[k].startswith("```"):
            body.append(lines[k])
            k += 1
        skip = SKIP.search(lines[start - 1]) if start else None
        out.append((m[1], "\n".join(body) + "\n", skip["why"] if skip else None, start + 1))
        k += 1
    return out


def _commands(code: str) -> list[list[str]]:
    """The ``radspatial ...`` commands of a bash block, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", code)
    found = []
    for line in joined.splitlines():
        for part in re.split(r"&&|\|\||;|\|", line.split(" #", 1)[0]):
            words = shlex.split(part, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # RAY_ADDRESS=... radspatial
                words = words[1:]
            if words and words[0].endswith("radspatial") and not words[0].endswith("/radspatial/"):
                found.append(words[1:])
    return found


ALL = [(doc, *b) for doc in DOCS for b in _blocks(doc)]
BASH = [(d, code, line) for d, lang, code, _, line in ALL if lang in ("bash", "sh", "console")]
PYTHON = [(d, code, why, line) for d, lang, code, why, line in ALL if lang == "python"]


def test_every_radspatial_command_in_the_docs_parses(capsys):
    parser = build_parser()
    checked, bad = 0, []
    for doc, code, line in BASH:
        for argv in _commands(code):
            if "--help" in argv or "-h" in argv:
                continue
            try:
                parser.parse_args(argv)
            except SystemExit:
                err = capsys.readouterr().err.strip().splitlines()[-1:]
                bad.append(f"{doc.name}:{line}: radspatial {shlex.join(argv)}: {err}")
            checked += 1
    assert not bad, "\n".join(bad)
    assert checked >= 40  # README and docs together hold this many commands


@pytest.mark.parametrize("doc", sorted({d for d, *_ in PYTHON}), ids=lambda d: d.name)
def test_python_blocks_name_only_what_they_define(doc, tmp_path):
    """The NameError class of bug (docs/phantoms.md used ``Path`` without importing it). A
    doc's blocks are one session, in order, as python_api.md's are run."""
    src = tmp_path / "blocks.py"
    src.write_text("\n".join(code for d, code, _, _ in PYTHON if d == doc))
    res = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821", str(src)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, f"{doc.name}:\n{res.stdout}"


def test_runnable_python_blocks_run(tmp_path):
    runnable = [(d, c, n) for d, c, why, n in PYTHON if why is None and d.name != "python_api.md"]
    skipped = {f"{d.name}:{n}" for d, _, why, n in PYTHON if why}
    assert {d.name for d, _, _ in runnable} >= {"README.md"}
    assert skipped, "blocks that cannot run here are marked, not silently left out"
    for doc, code, line in runnable:
        res = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert res.returncode == 0, f"{doc.name}:{line}:\n{res.stderr[-2000:]}"
    assert (tmp_path / "report" / "index.html").is_file()  # the README's API example


def test_docs_cli_md_is_every_command_s_help_as_the_parsers_give_it():
    """docs/cli.md is generated from the parsers; regenerate it when an option changes:
    ``python -m radspatial.cli.reference > docs/cli.md``."""
    from radspatial.cli.reference import cli_reference

    text = cli_reference()
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert doc == text, "docs/cli.md is stale: python -m radspatial.cli.reference > docs/cli.md"
    wanted = ["`--per-slice PER_SLICE`", "contour", "`--temperature TEMPERATURE`"]
    wanted += ["totalsegmentator", "## radspatial probe vlm", "## radspatial import inspect"]
    for option in wanted:
        assert option in text, option


LINK = re.compile(r"\]\((?!https?:|mailto:)([^)\s]+)\)")


def _anchors(doc: Path) -> set[str]:
    """GitHub's ids of a page's headings (lower case, punctuation dropped, spaces -> '-',
    a repeated id numbered), outside code blocks."""
    seen: dict[str, int] = {}
    fence = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        fence ^= line.startswith("```")
        if fence or not re.match(r"#{1,6} ", line):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    return {f"{s}-{k}" if k else s for s, n in seen.items() for k in range(n + 1)}


def test_every_relative_link_in_the_docs_names_a_file():
    """README.md, docs/**.md and the lab notebook (benchmarks/RESULTS.md): every link or image
    to a path in the repository points to a file that exists, and a #fragment to a heading of
    that page (pages move between folders)."""
    bad = []
    for doc in [*DOCS, ROOT / "benchmarks" / "RESULTS.md"]:
        for m in LINK.finditer(doc.read_text(encoding="utf-8")):
            target, _, fragment = m[1].partition("#")
            path = (doc.parent / target) if target else doc
            if not path.exists():
                bad.append(f"{doc.relative_to(ROOT)}: {m[1]}")
            elif fragment and path.suffix == ".md" and fragment not in _anchors(path):
                bad.append(f"{doc.relative_to(ROOT)}: {m[1]} (no such heading)")
    assert not bad, "\n".join(bad)
