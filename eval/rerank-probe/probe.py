"""Would a learned reranker over rag-search's candidates reach what issue 15 asks?

A LambdaRank model (LightGBM) re-orders HYBRID's first 100 hits per query from features the
service has at fusion time: the fused rank and score, each list's rank and score (BM25, dense),
the item's lines, kind and test-ness, how many of the first 20 hits share its file and the rank
of its file's best hit, the query's length and the path's depth. It is trained on three crates of
../shared/eval and scored on the fourth (leave one crate out), with the label of the default
rule (a hit holding the gold counts) or of the strict rule (--strict-labels), and scored both
ways. Findings: docs/RETRIEVAL.md, "Dense retrieval".

Input: the run files of `ploke-rag-eval --strategies bm25,dense,hybrid --top-k 100`.
Needs numpy and lightgbm (`python3 -m venv v && v/bin/pip install numpy lightgbm`):
    v/bin/python eval/rerank-probe/probe.py RUNS_DIR [--strict-labels] [--features 2,8]
"""

import argparse
import collections
import json
import math
import os
import sys

import lightgbm
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EVAL = os.path.join(HERE, "..", "..", "..", "shared", "eval")

FEATURES = [
    "hybrid rank", "1/(10+rank)", "score/top score", "1/(10+bm25 rank)", "1/(10+dense rank)",
    "bm25 score/top", "dense score/top", "ln lines", "kind", "test", "file's hits in first 20",
    "file's best rank", "file's best", "query words", "path depth",
]


def load_run(path):
    with open(path) as f:
        return {r["id"]: r["ranked"] for r in map(json.loads, f)}


def key(hit):
    return hit["file"], hit["start_line"], hit["end_line"]


def features(query, fused, bm25, dense):
    """One row per fused hit (its first 100)."""
    bs = {key(h): h["score"] for h in bm25}
    ds = {key(h): h["score"] for h in dense}
    b_top = max(bs.values(), default=1.0) or 1.0
    d_top = max(ds.values(), default=1.0) or 1.0
    in_first = collections.Counter(h["file"] for h in fused[:20])
    best = {}
    for i, h in enumerate(fused):
        best.setdefault(h["file"], i + 1)
    top = fused[0]["score"] if fused else 1.0
    rows = []
    for i, h in enumerate(fused):
        br, dr = h.get("bm25_rank", 0), h.get("dense_rank", 0)
        rows.append([
            i + 1, 1 / (11 + i), h["score"] / top, 1 / (10 + br) if br else 0.0,
            1 / (10 + dr) if dr else 0.0, bs.get(key(h), 0.0) / b_top,
            ds.get(key(h), 0.0) / d_top, math.log(h["end_line"] - h["start_line"] + 1),
            h["kind"], int("test" in h["canon_path"]), in_first[h["file"]], best[h["file"]],
            int(best[h["file"]] == i + 1), len(query["query"].split()),
            h["canon_path"].count("::"),
        ])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", help="folder with bm25.jsonl, dense.jsonl, hybrid.jsonl (top 100)")
    ap.add_argument("--strict-labels", action="store_true", help="train on the strict rule")
    ap.add_argument("--features", help="comma-separated feature numbers (default: all)")
    ap.add_argument("--trees", type=int, default=100)
    args = ap.parse_args()
    sys.path.insert(0, EVAL)
    from score import hits, score_query  # the dataset's own rule and metrics

    with open(os.path.join(EVAL, "queries.jsonl")) as f:
        queries = {q["id"]: q for q in map(json.loads, f)}
    runs = {s: load_run(os.path.join(args.runs, f"{s}.jsonl")) for s in ("bm25", "dense", "hybrid")}
    keep = [int(x) for x in args.features.split(",")] if args.features else list(range(len(FEATURES)))
    ids, groups, rows, labels = [], [], [], []
    for qid, q in queries.items():
        fused = runs["hybrid"][qid][:100]
        rows += [[r[k] for k in keep] for r in features(q, fused, runs["bm25"][qid], runs["dense"][qid])]
        labels += [int(any(hits(h, g, args.strict_labels) for g in q["gold"])) for h in fused]
        ids.append(qid)
        groups.append(len(fused))
    x, y = np.array(rows, dtype=float), np.array(labels)
    offsets = np.cumsum([0] + groups)
    reranked = {}
    for repo in sorted({queries[q]["repo"] for q in ids}):
        train = [i for i, q in enumerate(ids) if queries[q]["repo"] != repo]
        rows_of = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in train])
        model = lightgbm.LGBMRanker(n_estimators=args.trees, learning_rate=0.05, num_leaves=7,
                                    min_child_samples=20, verbose=-1)
        model.fit(x[rows_of], y[rows_of], group=[groups[i] for i in train])
        for i, q in enumerate(ids):
            if queries[q]["repo"] == repo:
                order = np.argsort(-model.predict(x[offsets[i]:offsets[i + 1]]), kind="stable")
                reranked[q] = [runs["hybrid"][q][j] for j in order]
    print("features:", ", ".join(FEATURES[k] for k in keep))
    print("labels:", "strict" if args.strict_labels else "default", "rule")
    for split in ("main", "easy"):
        for name, run in (("HYBRID", runs["hybrid"]), ("reranked", reranked)):
            line = []
            for strict in (False, True):
                scores = [score_query(queries[q], run[q], strict) for q in ids
                          if queries[q]["split"] == split]
                line.append(" / ".join(f"{np.mean([s[m] for s in scores]):.3f}"
                                       for m in ("R@1", "R@10", "MRR@10")))
            print(f"{split:5} {name:9} default {line[0]}   strict {line[1]}")


if __name__ == "__main__":
    main()
