#!/usr/bin/env python3
"""Fails if a relative link in the repository's Markdown points nowhere.

Checks every `[text](target)` in README.md, SECURITY.md, CHANGELOG.md and
docs/**/*.md whose target is not a URL (http:, https:, mailto:): the file
(relative to the page that links it) must exist, and a `#fragment` must be
a heading of the target page (GitHub's slug: lower case, punctuation but
`-` and `_` dropped, spaces to `-`). Links inside code spans and fenced
code blocks are not links and are skipped.

Usage: scripts/check-doc-links.py   (from anywhere; exit 1 on a broken link)
"""

import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path):
    """(number, line) of the lines outside fenced code, code spans blanked."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, re.sub(r"`[^`]*`", "``", line)


def slug(heading):
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    for _, line in prose_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def pages():
    for name in ["README.md", "SECURITY.md", "CHANGELOG.md"]:
        if (REPO / name).exists():
            yield REPO / name
    yield from sorted((REPO / "docs").rglob("*.md"))


def main():
    broken = []
    checked = 0
    for page in pages():
        for number, line in prose_lines(page):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                checked += 1
                file_part, _, fragment = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                where = f"{page.relative_to(REPO)}:{number}: {target}"
                if not dest.exists():
                    broken.append(f"{where}: no such file")
                elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                    broken.append(f"{where}: no heading #{fragment}")
    for b in broken:
        print(b, file=sys.stderr)
    print(f"check-doc-links: {checked} relative links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
