#!/usr/bin/env python3
"""Lists the library's public items, one a line, from rustdoc's output: every item at its
canonical path (all.html), the crate root's re-exports, the prelude, and the methods the
`InterProcessLock` trait shows. For the CHANGELOG's before/after record of the public surface.

Usage: cargo doc --no-deps --all-features -p zk-locks && scripts/public-items.py [DOC_DIR]
(DOC_DIR defaults to target/doc/zk_locks)."""
import os
import re
import sys

doc = sys.argv[1] if len(sys.argv) > 1 else "target/doc/zk_locks"


def read(name):
    with open(os.path.join(doc, name), encoding="utf-8") as f:
        return f.read()


lines = []
# Modules: every directory rustdoc wrote an index for.
for root, _dirs, files in os.walk(doc):
    if "index.html" in files and "src" not in root.split(os.sep):
        rel = os.path.relpath(root, doc)
        lines.append("mod " + ("zk_locks" if rel == "." else "zk_locks::" + rel.replace(os.sep, "::")))
# Items at their canonical paths, with their kind (struct, enum, trait, fn, type, constant...).
for href, name in re.findall(r'<li><a href="([^"]+)">([^<]+)</a></li>', read("all.html")):
    kind = os.path.basename(href).split(".")[0]
    lines.append(f"{kind} zk_locks::{name}")
# Re-exports at the root and in the prelude.
for module in ["index.html", "prelude/index.html"]:
    if os.path.exists(os.path.join(doc, module)):
        prefix = "zk_locks::" + ("prelude::" if module.startswith("prelude") else "")
        for name in re.findall(r'id="reexport\.([A-Za-z0-9_]+)"', read(module)):
            lines.append(f"use {prefix}{name}")
# The main trait's methods as its page shows them (hidden ones are not there).
trait = read("locks/trait.InterProcessLock.html")
for name in sorted(set(re.findall(r'id="(?:ty)?method\.([a-z0-9_]+)"', trait))):
    lines.append(f"method zk_locks::InterProcessLock::{name}")
print("\n".join(sorted(set(lines))))
