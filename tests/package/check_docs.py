#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs keep up with the tree (ctest `docs_current`):

- every relative link in README.md and docs/**/*.md names a file that exists and, with a
  `#anchor`, a heading of that file (GitHub's anchor rules);
- every message corestreamd logs with a literal text (CS_LOG, CS_LOG0, cs_log_kvs,
  log_subscriber in src/) is written somewhere in the operator's manual (docs/operations/);
- the unit shown in docs/operations/systemd.md is packaging/systemd/corestreamd.service.in with
  the Debian package's paths.

    check_docs.py SOURCE_DIR
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1]).resolve()
problems = []


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, seen, fence = set(), {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        found.add(s if n == 0 else f"{s}-{n}")
    return found


docs = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
for doc in docs:
    fence = False
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        for target in link.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(root)}:{n}: {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: no heading for #{anchor} in {dest.relative_to(root)}")

manual = "\n".join(p.read_text(encoding="utf-8") for p in sorted((root / "docs" / "operations").glob("*.md")))
call = re.compile(r'\b(?:CS_LOG0?|cs_log_kvs|log_subscriber)\(\s*CS_LOG_[A-Z]+,\s*"((?:[^"\\]|\\.)*)"')
for src in sorted((root / "src").rglob("*.c")):
    for msg in call.findall(src.read_text(encoding="utf-8")):
        msg = msg.encode().decode("unicode_escape")
        if msg not in manual:
            problems.append(f"{src.relative_to(root)}: the log message {msg!r} is not in docs/operations/")

unit = (root / "packaging" / "systemd" / "corestreamd.service.in").read_text(encoding="utf-8")
unit = unit.replace("@CS_ENV_FILE@", "/etc/default/corestreamd").replace("@CMAKE_INSTALL_FULL_SBINDIR@", "/usr/sbin")
page = (root / "docs" / "operations" / "systemd.md").read_text(encoding="utf-8")
shown = re.search(r"```ini\n(# corestreamd as a hardened.*?)```", page, re.S)
if not shown or shown.group(1) != unit:
    problems.append("docs/operations/systemd.md: the unit shown differs from packaging/systemd/corestreamd.service.in")

for p in problems:
    print("FAIL:", p)
if problems:
    sys.exit(1)
print(f"PASS: the links of {len(docs)} docs resolve, every literal log message is in docs/operations/, "
      "the unit shown is the unit")
