"""The repository stands on its own: no file it tracks points outside it (a sibling folder of the
checkout, or an absolute path of one machine), so a clone carries everything it refers to."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Built from parts so that this file does not match itself.
# The starting contract lived outside the repository as an upper-case DESIGN file; the repository's
# own design is docs/design.md, so a bare reference to the former points outside too.
_OUTSIDE = re.compile(
    "|".join([r"\.\./" + "shared", "/" + "work/", "/" + "root/", "/" + "home/", r"(?<![\w/])" + "DESIGN" + r"\.md"])
)


def _tracked_text_files() -> list[Path]:
    names = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    files = []
    for name in filter(None, names):
        path = ROOT / name
        if path.is_file() and b"\0" not in path.read_bytes()[:4096]:
            files.append(path)
    return files


def test_no_file_points_outside_the_repository():
    offenders = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not offenders, "paths outside the repository:\n" + "\n".join(offenders)


def test_the_design_document_is_in_the_repository():
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for heading in ("On-disk format", "Configuration", "Wire APIs", "The put path"):
        assert heading in design
