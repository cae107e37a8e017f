"""The repository stands on its own and speaks of the software only.

- Its definitions are its own: nothing points at a definitions file outside the checkout (the
  ``docs`` folder beside it) or cites the old external spec; "definitions §N" names a section
  docs/definitions.md has.
- No working vocabulary: no work "stop" labels, no issue numbers of an outside tracker, no
  branch names, no clock-time working windows. How the code got here lives in git history.
- docs/README.md indexes docs/: every link in it opens a page that exists, and every page of
  docs/ is listed there.

Each check runs on every text file of the checkout (tracked or not, ignored ones aside) and has a
test of its own that shows it can fail.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TEXT_SUFFIXES = {".py", ".js", ".mjs", ".md", ".html", ".css", ".sh", ".toml", ".cfg", ".txt",
                 ".yml", ".yaml", ".json", ".ini", ""}  # fmt: skip
#: third-party files kept as they came
VENDORED = ("static/vendor/", "tests/browser/vendor/", "static/js/vendor/")

# The patterns are spelled in pieces so that this file does not match itself.
_SPEC = "SP" + "EC"
RULES: dict[str, re.Pattern[str]] = {
    "a definitions file outside the repository": re.compile(r"\.\./shared/" + "docs"),
    "the external spec instead of docs/definitions.md": re.compile(
        rf"\b{_SPEC}\b(?! ?[-_a-z])|{_SPEC}\.md"
    ),
    "a work-stop label": re.compile(r"\b[Ss]to" + r"ps? \d+\b|\bsto" + r"p-\d+\b"),
    "an issue number of an outside tracker": re.compile(r"\b[Ii]ss" + r"ues? #?\d+\b"),
    "a branch name": re.compile(r"\bbra" + r"nch `[^`]+`"),
    "a clock-time working window": re.compile(r"\b\d\d:\d\d\s*[–-]\s*\d\d:\d\d\s*U" + "TC\\b"),
}


def text_files() -> list[Path]:
    """The checkout's text files, tracked or new (what .gitignore ignores left out)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    files = []
    for name in filter(None, out.split("\0")):
        path = ROOT / name
        if name.startswith(VENDORED) or path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        if path.stat().st_size > 2_000_000 or path == Path(__file__).resolve():
            continue
        files.append(path)
    return files


def violations(text: str) -> list[tuple[str, int, str]]:
    """(rule, line number, the line) of every rule a text breaks."""
    found = []
    for no, line in enumerate(text.splitlines(), 1):
        for rule, pattern in RULES.items():
            if pattern.search(line):
                found.append((rule, no, line.strip()[:120]))
    return found


def test_the_repository_speaks_of_the_software_only():
    bad = []
    for path in text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        where = path.relative_to(ROOT)
        bad += [f"{where}:{no}: {rule}: {line}" for rule, no, line in violations(text)]
    assert not bad, "say what the code does, not how it got here:\n" + "\n".join(bad[:40])


def test_the_rules_can_fail():
    caught = {rule for rule, _, _ in violations(
        "read ../shared/" + "docs/x.md first\n"
        "as " + _SPEC + " §4 says\n"
        "measured at sto" + "p 37\n"
        "(iss" + "ue 26, finding 10)\n"
        "on bra" + "nch `fwd512`\n"
        "run at 20:51–21:53 U" + "TC\n"
    )}  # fmt: skip
    assert caught == set(RULES)
    # software words that merely look alike pass
    fine = (
        "ALL_" + _SPEC + "S = [...]; SPECIAL_RE; the definitions §4 metric; a bus stop sign;\n"
        "the UTC creation time; Step 12: adaptive sparsity; ../shared/data/wikitext-2\n"
    )
    assert violations(fine) == []


# ----------------------------------------------------------------------------- definitions §N

CITED = re.compile(r"definitions(?:\.md)? §(\d+)")


def sections(text: str) -> set[int]:
    return {int(m) for m in re.findall(r"^## (\d+)\. ", text, flags=re.M)}


def test_every_cited_section_exists():
    have = sections((DOCS / "definitions.md").read_text(encoding="utf-8"))
    assert have == set(range(1, 13)), f"docs/definitions.md should have §1-§12, has {sorted(have)}"
    bad = []
    for path in text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            bad += [f"{path.relative_to(ROOT)}:{no}: §{n}" for n in CITED.findall(line)
                    if int(n) not in have]  # fmt: skip
    assert not bad, "definitions sections that do not exist:\n" + "\n".join(bad)


def test_the_section_check_can_fail():
    assert sections("## 1. The model\n## 12. Learned\n### 3. not a section\n") == {1, 12}
    assert CITED.findall("as definitions §4 and docs/definitions.md §13 say") == ["4", "13"]


# ----------------------------------------------------------------------------- the docs index

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def broken_links(index: Path) -> list[str]:
    """The relative links of a markdown page that open nothing."""
    return [
        target
        for target in LINK.findall(index.read_text(encoding="utf-8"))
        if "://" not in target and not (index.parent / target).exists()
    ]


def unlisted_pages(index: Path) -> list[str]:
    listed = {Path(t).name for t in LINK.findall(index.read_text(encoding="utf-8"))}
    return sorted(p.name for p in index.parent.glob("*.md") if p != index and p.name not in listed)


def test_the_docs_index_links_every_page_and_only_pages_that_exist():
    index = DOCS / "README.md"
    assert not broken_links(index), f"docs/README.md links to missing pages: {broken_links(index)}"
    assert not unlisted_pages(index), f"docs/README.md does not list: {unlisted_pages(index)}"


def test_the_index_checks_can_fail(tmp_path):
    (tmp_path / "a.md").write_text("# a\n")
    (tmp_path / "b.md").write_text("# b\n")
    index = tmp_path / "README.md"
    index.write_text(
        "| [a.md](a.md) | a |\n| [gone.md](gone.md#x) | gone |\n[web](https://x.org)\n"
    )
    assert broken_links(index) == ["gone.md"]
    assert unlisted_pages(index) == ["b.md"]
