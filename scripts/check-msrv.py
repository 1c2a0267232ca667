#!/usr/bin/env python3
"""Fails when a dependency the library builds with (normal dependencies, every feature on,
as Cargo.lock has them) declares a newer `rust-version` than zk-locks' own.

Cargo's MSRV-aware resolver (`resolver = "3"`) picks such versions only when nothing older
fits, and `cargo update` may still move the lock file: this keeps `rust-version` true.
Dev-dependencies (criterion, proptest, the test kit's tree) are not covered: they build the
tests, which run on the current toolchain."""
import json
import subprocess
import sys

meta = json.loads(subprocess.check_output(
    ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"]))
packages = {p["id"]: p for p in meta["packages"]}
root = next(p for p in meta["packages"] if p["name"] == "zk-locks")
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}


def version(text):
    """`1.85` and `1.85.0` are one version."""
    parts = [int(x) for x in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


ours = version(root["rust_version"])
seen, todo, too_new = set(), [root["id"]], []
while todo:
    node = nodes[todo.pop()]
    for dep in node["deps"]:
        if not any(k["kind"] is None for k in dep["dep_kinds"]) or dep["pkg"] in seen:
            continue
        seen.add(dep["pkg"])
        todo.append(dep["pkg"])
        declared = packages[dep["pkg"]].get("rust_version")
        if declared and version(declared) > ours:
            too_new.append(f'{packages[dep["pkg"]]["name"]} {packages[dep["pkg"]]["version"]} '
                           f'declares rust-version {declared}')

if too_new:
    print(f"rust-version {root['rust_version']} is not true of the locked tree:", *too_new,
          sep="\n  ")
    sys.exit(1)
print(f"rust-version {root['rust_version']} holds for {len(seen)} locked normal dependencies")
