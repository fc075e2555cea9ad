#!/usr/bin/env python3
"""Builds the quoted-text retrieval set (docs/RETRIEVAL.md, "Quoted text is found as written").

For each crate of ../shared/eval (sources from its paths.json), functions and methods holding a
string literal of three or more words that appears nowhere else in the crate's corpus files
(at most 40 per crate, one literal per function, a fixed random order) give two queries:
`where does "LITERAL" come from?` (split `main`) and the same without quotes (split `easy`),
gold = that function. Writes OUT/queries.jsonl and links OUT/items to the dataset's items.

    scripts/quoted-eval.py --sources ~/.cache/ploke-eval/sources/paths.json --out /tmp/qeval
    target/release/ploke-rag-eval --eval /tmp/qeval --sources ... --strategies bm25,hybrid ...
    python3 ../shared/eval/score.py RUN.jsonl --queries /tmp/qeval/queries.jsonl --split main
"""
import argparse
import collections
import json
import os
import random


def literals(line):
    """The string literals of one line of Rust, quotes paired in order, escapes skipped."""
    out, i, n = [], 0, len(line)
    while i < n:
        if line[i] == '"':
            j, text = i + 1, []
            while j < n and line[j] != '"':
                if line[j] == "\\" and j + 1 < n:
                    text.append(line[j : j + 2])
                    j += 2
                    continue
                text.append(line[j])
                j += 1
            if j < n:
                out.append("".join(text))
            i = j + 1
        elif line[i] == "'" and i + 2 < n and line[i + 2] == "'":
            i += 3  # a char literal such as '"'
        else:
            i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval", default=os.path.join(os.path.dirname(__file__), "../../shared/eval"))
    ap.add_argument("--sources", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-crate", type=int, default=40)
    a = ap.parse_args()
    random.seed(7)
    roots = json.load(open(a.sources))
    queries = []
    for repo, root in sorted(roots.items()):
        items = [json.loads(l) for l in open(os.path.join(a.eval, "items", f"{repo}.jsonl"))]
        files = sorted({i["file"] for i in items})
        src = {f: open(os.path.join(root, f), encoding="utf-8", errors="replace").read().split("\n") for f in files}
        count = collections.Counter(lit for lines in src.values() for l in lines for lit in literals(l))
        found = []
        for it in items:
            if it["kind"] not in ("function", "method"):
                continue
            for l in src[it["file"]][it["start_line"] - 1 : it["end_line"]]:
                for lit in literals(l):
                    if (
                        count[lit] == 1
                        and 15 <= len(lit) <= 120
                        and len(lit.split()) >= 3
                        and "{" not in lit
                        and "\\" not in lit
                    ):
                        found.append((it, lit))
        random.shuffle(found)
        seen = set()
        for it, lit in found:
            if it["id"] in seen or len(seen) >= a.per_crate:
                continue
            seen.add(it["id"])
            gold = [{k: it[k] for k in ("file", "start_line", "end_line", "qualname")}]
            for split, text in (("main", f'"{lit}"'), ("easy", lit)):
                queries.append({
                    "id": f"{repo}-{split}-{len(queries)}",
                    "repo": repo,
                    "crate": repo,
                    "query": f"where does {text} come from?",
                    "split": split,
                    "gold": gold,
                })
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "queries.jsonl"), "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    link = os.path.join(a.out, "items")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(os.path.join(a.eval, "items")), link)
    print(f"{len(queries)} queries in {a.out}/queries.jsonl")


if __name__ == "__main__":
    main()
