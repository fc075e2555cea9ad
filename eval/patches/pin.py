#!/usr/bin/env python3
"""Writes packages.json: for each Debian source package named on stdin (one per line), the
bookworm version, its `.debian.tar.xz` (pool path, sha256) and its `python3-*` binary
packages of that same version (pool path, sha256), read from apt's lists on this machine.

    /usr/lib/apt/apt-helper cat-file /var/lib/apt/lists/*bookworm_main_source_Sources.lz4 > Sources
    /usr/lib/apt/apt-helper cat-file /var/lib/apt/lists/*bookworm_main_binary-amd64_Packages.lz4 > Packages
    python3 pin.py Sources Packages < names.txt > packages.json

The Sources index is there once apt's sources carry a `deb-src` entry for bookworm main and
`apt-get update` ran. Run once when the set's packages were chosen (see README.md); build.py
only reads its output.
"""
import json
import sys


def stanzas(path):
    """The stanzas of a Debian control-format index, as dicts (continuation lines joined with
    newlines)."""
    cur, key = {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if cur:
                    yield cur
                cur, key = {}, None
            elif line[0] in " \t" and key:
                cur[key] += "\n" + line.strip()
            else:
                key, _, value = line.partition(":")
                cur[key] = value.strip()
    if cur:
        yield cur


def main():
    sources_path, packages_path = sys.argv[1], sys.argv[2]
    wanted = [n.strip() for n in sys.stdin if n.strip()]
    sources = {}
    for s in stanzas(sources_path):
        if s.get("Package") in wanted:
            sources[s["Package"]] = s
    by_source = {}
    for p in stanzas(packages_path):
        name = p.get("Package", "")
        if not name.startswith("python3-") or name.endswith(("-doc", "-dbg", "-dbgsym", "-dev", "-whl")):
            continue
        src, _, srcver = p.get("Source", name).partition(" ")
        version = srcver.strip("()") or p.get("Version", "")
        by_source.setdefault((src, version), []).append(p)
    out = []
    for name in wanted:
        s = sources.get(name)
        if s is None:
            print(f"{name}: not in Sources", file=sys.stderr)
            continue
        version = s["Version"]
        debtar = None
        for line in s.get("Checksums-Sha256", "").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2].endswith(".debian.tar.xz"):
                debtar = {"filename": parts[2], "pool_path": f"{s['Directory']}/{parts[2]}",
                          "sha256": parts[0]}
        binaries = [
            {"name": p["Package"], "version": p["Version"],
             "filename": p["Filename"].rsplit("/", 1)[-1], "pool_path": p["Filename"],
             "sha256": p["SHA256"]}
            for p in sorted(by_source.get((name, version), []), key=lambda p: p["Package"])
        ]
        if debtar is None or not binaries:
            print(f"{name} {version}: no debian tarball or no python3 binary", file=sys.stderr)
            continue
        out.append({"repo": name, "version": version, "debian": debtar, "binaries": binaries})
    json.dump({"seed": "ploke-patches-1", "per_repo_cap": 10, "packages": out}, sys.stdout,
              indent=1)
    print()


if __name__ == "__main__":
    main()
