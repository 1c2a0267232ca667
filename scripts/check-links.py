#!/usr/bin/env python3
"""Fails when a relative link in the README, ARCHITECTURE.md, CHANGELOG.md or docs/*.md does
not resolve: a file or folder that is not there, or a `#fragment` that names no heading of
the target document (headings turned into anchors as GitHub does). Links with a scheme
(`https:`) and links inside code blocks are not checked.
"""
import glob
import os
import re
import sys


def anchors(path):
    found, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        match = None if fence else re.match(r"#+ (.*)", line)
        if match:
            text = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    broken = []
    for doc in ["README.md", "ARCHITECTURE.md", "CHANGELOG.md", *sorted(glob.glob("docs/*.md"))]:
        text = re.sub(r"```.*?```", "", open(doc, encoding="utf-8").read(), flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", link):
                continue
            path, _, fragment = link.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(target):
                broken.append(f"{doc}: {link}: no such file")
            elif fragment and target.endswith(".md") and fragment not in anchors(target):
                broken.append(f"{doc}: {link}: no such heading")
    for line in broken:
        print(line, file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
