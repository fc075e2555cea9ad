#!/usr/bin/env python3
"""Builds the names probe: queries that name a method (`Type::method`, "Add `m` to `T`", ...)
over ten crates.io packages that are not in ../shared/eval (this workspace's own dependencies,
so `cargo fetch` has them), with the method's lines as gold. A check that names win on code
nobody tuned for: the eval set's four crates are where the name rules were measured.

  build.py OUT_DIR        writes OUT_DIR/queries.jsonl, OUT_DIR/items/<crate>.jsonl (the
                          corpus files) and OUT_DIR/paths.json (crate -> source root)

Gold: inherent methods (`impl Type { fn m() }` at the file's top level, indented 4), their
lines up to the closing brace at the same indent; test helpers left out. Queries follow five
templates; a conventional-commit prefix (`m: ...`) names nothing by design, so those queries
measure the type and the context words only. 50 methods per crate, seeded: the same set on
every machine.
"""
import json
import os
import random
import re
import subprocess
import sys

CRATES = {
    "h2": "0.4.20",
    "axum": "0.8.9",
    "clap_builder": "4.6.7",
    "globset": "0.4.21",
    "ignore": "0.4.34",
    "indexmap": "2.14.2",
    "tower": "0.5.3",
    "tokio-util": "0.7.20",
    "hyper-util": "0.1.21",
    "regex-automata": "0.4.18",
}
PER_CRATE = 50
TEMPLATES = [
    "`{T}::{m}`",
    "fix `{T}::{m}` when the input is empty",
    "Add `{m}` to `{T}`",
    "{m}: avoid an allocation in {T}",
    "make {T}::{m} return an error instead of panicking",
]
IMPL = re.compile(r"^impl(?:<.*?>)?\s+(?:[\w:]+(?:<.*?>)?\s+for\s+)?([A-Z]\w*)")
FN = re.compile(
    r"^(\s+)(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+([a-z_]\w*)"
)


def roots(workspace):
    """Each crate's unpacked package, from cargo's own metadata."""
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            cwd=workspace,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    found = {}
    for p in meta["packages"]:
        if CRATES.get(p["name"]) == p["version"]:
            found[p["name"]] = os.path.dirname(p["manifest_path"])
    missing = sorted(set(CRATES) - set(found))
    if missing:
        sys.exit(f"not in this workspace's dependencies: {missing}")
    return found


def methods(root):
    """(file, type, method, first line, last line) of every inherent method under src/."""
    out = []
    for dirpath, dirnames, files in os.walk(os.path.join(root, "src")):
        dirnames.sort()
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            lines = open(path, errors="replace").read().split("\n")
            owner, trait_impl = None, False
            for i, line in enumerate(lines):
                m = IMPL.match(line)
                if m:
                    owner, trait_impl = m.group(1), " for " in line.split("{")[0]
                    continue
                if line.startswith("}"):
                    owner = None
                    continue
                f = FN.match(line)
                if not owner or trait_impl or not f or len(f.group(1)) != 4:
                    continue
                indent, end = f.group(1), None
                if line.rstrip().endswith("}") and "{" in line:
                    end = i
                else:
                    end = next(
                        (j for j in range(i + 1, min(len(lines), i + 400)) if lines[j] == indent + "}"),
                        None,
                    )
                if end is not None:
                    out.append((rel, owner, f.group(2), i + 1, end + 1))
    return [m for m in out if "/tests" not in m[0] and "test" not in m[2]]


def main():
    out_dir = sys.argv[1]
    workspace = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = roots(workspace)
    os.makedirs(os.path.join(out_dir, "items"), exist_ok=True)
    rng = random.Random(7)
    queries = []
    for crate in CRATES:
        root = found[crate]
        with open(os.path.join(out_dir, "items", f"{crate}.jsonl"), "w") as f:
            for dirpath, _, files in os.walk(os.path.join(root, "src")):
                for name in sorted(files):
                    if name.endswith(".rs"):
                        rel = os.path.relpath(os.path.join(dirpath, name), root)
                        f.write(json.dumps({"file": rel}) + "\n")
        picked = methods(root)
        rng.shuffle(picked)
        for rel, owner, method, start, end in picked[:PER_CRATE]:
            queries.append(
                {
                    "id": f"{crate}-{owner}-{method}-{start}",
                    "repo": crate,
                    "crate": crate,
                    "split": "easy",
                    "query": rng.choice(TEMPLATES).format(T=owner, m=method),
                    "gold": [
                        {
                            "file": rel,
                            "qualname": f"{owner}::{method}",
                            "kind": "method",
                            "start_line": start,
                            "end_line": end,
                        }
                    ],
                }
            )
    with open(os.path.join(out_dir, "queries.jsonl"), "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    with open(os.path.join(out_dir, "paths.json"), "w") as f:
        json.dump(found, f, indent=1)
    print(f"names probe: {len(queries)} queries over {len(found)} crates -> {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
