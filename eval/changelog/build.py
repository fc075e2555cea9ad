#!/usr/bin/env python3
"""Builds the Rust changelog set: a release's one changelog entry -> the functions that release
changed. For crates.io packages nobody tuned for, every pair of consecutive published versions
whose changelog section has exactly one entry gives a query (that entry, cleaned as
../shared/eval cleans a commit message); the gold is the functions the release changed,
localized by ../shared/eval's rules on the two packages and found in the newest package (the
corpus), as ../shared/eval finds a commit's functions at its release tag.

  build.py WORK_DIR     writes WORK_DIR/sources/<crate>/ (the newest package, unpacked),
                        WORK_DIR/paths.json, WORK_DIR/items/<crate>.jsonl (the corpus files),
                        WORK_DIR/queries.jsonl and WORK_DIR/fates.json; downloads to
                        WORK_DIR/cache/ (the crates.io index and .crate files)

Needs the PyPI packages tree_sitter and tree_sitter_rust (scripts/eval-changelog installs them
pinned into a venv). Talks only to crates.io (index.crates.io, static.crates.io).
"""
import difflib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import urllib.request
from collections import Counter

import tree_sitter as ts
import tree_sitter_rust

# crate -> the newest version taken (the corpus). Chosen for a changelog in the package with
# a section per release; none is in ../shared/eval.
CRATES = {
    "tokio": "1.54.1",
    "tokio-util": "0.7.20",
    "bytes": "1.12.2",
    "mio": "1.2.5",
    "http": "1.5.0",
    "h2": "0.4.20",
    "hashbrown": "0.17.2",
    "indexmap": "2.14.2",
    "log": "0.4.35",
    "tracing": "0.1.44",
    "tracing-core": "0.1.36",
    "crossbeam-channel": "0.5.17",
    "crossbeam-utils": "0.8.23",
    "parking_lot": "0.13.0",
    "once_cell": "1.21.4",
    "tempfile": "3.27.0",
    "axum": "0.8.9",
    "tower": "0.5.3",
    "tower-http": "0.7.1",
    "hyper-util": "0.1.21",
    "bitflags": "2.13.2",
    "similar": "3.2.1",
    "rand": "0.10.4",
    "bumpalo": "3.20.4",
    "memmap2": "0.9.12",
    "camino": "1.2.6",
    "serde_with": "3.25.0",
    "crossterm": "0.29.0",
    "futures-lite": "2.6.1",
    "async-channel": "2.5.0",
    "smol": "2.0.2",
    "nom": "8.0.0",
    "rayon": "1.12.0",
}
# How many releases back from the newest are paired.
HISTORY = 80
PARSER = ts.Parser(ts.Language(tree_sitter_rust.language()))

# ../shared/eval's file rules: test, bench, example code is not part of the corpus.
NOT_CORPUS = re.compile(
    r"(?:^|/)(?:tests?|benches|bench|examples?|fuzz|fuzz_targets|testdata|target)/|(?:^|/)tests?\.rs\Z"
)
# ../shared/eval's subject filters, applied to the entry.
SUBJECT_DROP = re.compile(
    r"\b(?:merge|revert|release|bump|version|msrv|rust-version|rustfmt|fmt|style|clippy|lints?|"
    r"warnings?|typos?|spelling|grammar|docs?|documentation|readme|changelog|ci|workflows?|"
    r"minimal-versions|deps|dependency|dependencies|dependabot|upgrade|update \S+ to)\b",
    re.I,
)
# Entries GitHub's generated notes add beside the changes.
NOT_A_CHANGE = re.compile(r"made (?:their|his|her) first contribution|^\**full changelog", re.I)
THANKS = re.compile(r"\bthanks?(?: you)?\b[^.!]*[.!]?", re.I)
URL = re.compile(r"<?https?://\S+>?")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
REFS = re.compile(
    r"\(\s*\[?#\d+\]?(?:\s*,\s*\[?#\d+\]?)*\s*\)|\[#\d+\]|\(#\d+\)|#\d+\b|"
    r"\b[\w.-]+/[\w.-]+#\d+\b|\bby @[\w-]+(?: in\b)?|@[\w-]+"
)
MAX_QUERY_CHARS = 600
# Item kinds as ../shared/eval names them.
ITEM_KINDS = {
    "function_item": "function", "struct_item": "struct", "enum_item": "enum",
    "union_item": "union", "trait_item": "trait", "impl_item": "impl", "mod_item": "mod",
    "macro_definition": "macro", "const_item": "const", "static_item": "static",
    "type_item": "type",
}
# A release of more entries than this says too many things for one query.
MAX_ENTRIES = 3


def fetch(url, dest):
    if not os.path.exists(dest):
        with urllib.request.urlopen(url, timeout=120) as r:
            data = r.read()
        with open(dest + ".part", "wb") as f:
            f.write(data)
        os.replace(dest + ".part", dest)
    with open(dest, "rb") as f:
        return f.read()


def index_path(name):
    n = name.lower()
    if len(n) <= 2:
        return f"{len(n)}/{n}"
    if len(n) == 3:
        return f"3/{n[0]}/{n}"
    return f"{n[:2]}/{n[2:4]}/{n}"


def semver(v):
    return tuple(int(p) for p in v.split("."))


def releases(cache, name, newest):
    """Stable, unyanked versions up to `newest`, oldest first, the last HISTORY + 1."""
    data = fetch(f"https://index.crates.io/{index_path(name)}", os.path.join(cache, f"{name}.index"))
    out = set()
    for line in data.decode().splitlines():
        e = json.loads(line)
        if not e.get("yanked") and re.fullmatch(r"\d+\.\d+\.\d+", e["vers"]):
            if semver(e["vers"]) <= semver(newest):
                out.add(e["vers"])
    return sorted(out, key=semver)[-(HISTORY + 1):]


def package(cache, name, version):
    """path -> bytes of every file of the package (paths relative to its root)."""
    data = fetch(
        f"https://static.crates.io/crates/{name}/{name}-{version}.crate",
        os.path.join(cache, f"{name}-{version}.crate"),
    )
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for m in tf.getmembers():
            if m.isfile():
                rel = m.name.split("/", 1)[1]
                files[rel] = tf.extractfile(m).read()
    return files


def changelog(files):
    for rel in sorted(files):
        if "/" not in rel and re.match(r"(CHANGELOG|CHANGES|RELEASES)", rel, re.I):
            return files[rel].decode(errors="replace")
    return None


def section(text, version):
    """The lines of `version`'s section: after an ATX (`## 1.2.3 …`, `## [1.2.3]`, `# v1.2.3`) or
    setext (`1.2.3 (date)` over `===`) heading naming it, up to the next heading of a release."""
    lines = text.split("\n")
    ver = re.escape(version)
    head = re.compile(rf"^#{{1,3}}\s.*?(?<![\d.])\[?v?{ver}\]?(?![\d.])")
    any_release = re.compile(r"^#{1,3}\s.*?\bv?\d+\.\d+\.\d+\b|^v?\d+\.\d+\.\d+\b.*$")
    start = None
    for i, line in enumerate(lines):
        setext = (i + 1 < len(lines) and re.fullmatch(r"[=-]{3,}\s*", lines[i + 1])
                  and re.match(rf"^v?{ver}(?![\d.])", line))
        if head.match(line) or setext:
            start = i + (2 if setext else 1)
            break
    if start is None:
        return None
    out = []
    for i in range(start, len(lines)):
        line = lines[i]
        nxt_setext = i + 1 < len(lines) and re.fullmatch(r"[=-]{3,}\s*", lines[i + 1])
        if (line.startswith("#") and any_release.match(line)) or (nxt_setext and any_release.match(line)):
            break
        out.append(line)
    return out


def entries(lines):
    """The section's top-level list entries (continuation lines joined), and its prose lines."""
    out, prose, cur = [], [], None
    for line in lines:
        if re.match(r"^[-*+] \S", line):
            if cur is not None:
                out.append(cur)
            cur = line[2:].strip()
        elif cur is not None and re.match(r"^\s+\S", line) and not re.match(r"^\s+[-*+] ", line):
            cur += " " + line.strip()
        elif cur is not None and re.match(r"^\s+[-*+] ", line):
            cur += " " + line.strip()[2:]
        elif cur is not None and line.strip() and not line.startswith("#"):
            cur += " " + line.strip()  # a lazy continuation line
        else:
            if cur is not None:
                out.append(cur)
                cur = None
            s = line.strip()
            if s and not s.startswith("#") and not re.fullmatch(r"[=-]{3,}", s) and not s.startswith("["):
                prose.append(s)
    if cur is not None:
        out.append(cur)
    return out, prose


def clean(text):
    text = LINK.sub(r"\1", text)
    text = text.replace("**", "")
    text = THANKS.sub("", text)
    text = URL.sub("", text)
    text = REFS.sub("", text)
    text = re.sub(r"\(\s*[,;]?\s*\)", "", text)
    text = re.sub(r"\s+", " ", text).strip(" .,:;-")
    if len(text) > MAX_QUERY_CHARS:
        text = text[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    return text


# --- localization (../shared/eval's rules) -------------------------------------------------


def is_test_attr(node):
    t = node.text.decode(errors="replace")
    return bool(re.match(r"#\[(?:\w+::)*test\b", t)) or "cfg(test)" in t.replace(" ", "")


def attrs_above(node):
    out, prev = [], node.prev_named_sibling
    while prev is not None and prev.type in ("attribute_item", "line_comment", "block_comment"):
        if prev.type == "attribute_item":
            out.append(prev)
        prev = prev.prev_named_sibling
    return out


def owner_of(node):
    parent = node.parent
    if parent is not None and parent.type == "declaration_list":
        holder = parent.parent
        if holder is not None and holder.type == "impl_item":
            ty = holder.child_by_field_name("type")
            tname = re.sub(r"<.*", "", ty.text.decode()) if ty is not None else "?"
            trait = holder.child_by_field_name("trait")
            return f"<{tname} as {trait.text.decode()}>" if trait is not None else tname
        if holder is not None and holder.type == "trait_item":
            return holder.child_by_field_name("name").text.decode()
    return None


class FileParse:
    """One file's functions (qualified name, copy index, rows), test rows, ignorable rows."""

    def __init__(self, data):
        self.fns = []  # (key, first_row, last_row, attr_rows)
        self.methods = set()
        # Every non-test item at item level, for the corpus list (../shared/eval's `items/`).
        self.items = []
        self.test_rows = set()
        self.ignore_rows = set()
        self.comment_cols = {}
        self._walk(data)
        seen = Counter()
        keyed = []
        for qual, a, b, attr in sorted(self.fns, key=lambda f: f[1]):
            keyed.append(((qual, seen[qual]), a, b, attr))
            seen[qual] += 1
        self.fns = keyed
        self.counts = seen
        self.row_fn = {}
        for key, a, b, attr in self.fns:
            for r in range(a, b + 1):
                self.row_fn.setdefault(r, key)
            for r in attr:
                self.row_fn.setdefault(r, key)

    def _walk(self, data):
        todo = [(PARSER.parse(data).root_node, [], False)]
        while todo:
            node, mods, test = todo.pop()
            t = node.type
            if t in ("line_comment", "block_comment"):
                for r in range(node.start_point.row, node.end_point.row + 1):
                    a = node.start_point.column if r == node.start_point.row else 0
                    b = node.end_point.column if r == node.end_point.row else 10**9
                    self.comment_cols.setdefault(r, []).append((a, b))
                continue
            if t in ("use_declaration", "extern_crate_declaration"):
                self.ignore_rows.update(range(node.start_point.row, node.end_point.row + 1))
                continue
            here_test = test or any(is_test_attr(a) for a in attrs_above(node))
            if t == "mod_item":
                name = node.child_by_field_name("name")
                if name is not None and name.text in (b"tests", b"test"):
                    here_test = True
            if here_test and t in ("mod_item", "function_item", "impl_item"):
                self.test_rows.update(range(node.start_point.row, node.end_point.row + 1))
                for a in attrs_above(node):
                    self.test_rows.update(range(a.start_point.row, a.end_point.row + 1))
                continue
            if t in ITEM_KINDS and node.parent is not None and node.parent.type in (
                "source_file", "declaration_list"
            ):
                self._item(node, mods)
            if t == "function_item":
                name = node.child_by_field_name("name").text.decode()
                owner = owner_of(node)
                qual = f"{owner}::{name}" if owner else name
                if mods and owner is None:
                    qual = "::".join(mods) + "::" + qual
                attr_rows = set()
                for a in attrs_above(node):
                    attr_rows.update(range(a.start_point.row, a.end_point.row + 1))
                self.fns.append((qual, node.start_point.row, node.end_point.row, attr_rows))
                if owner:
                    self.methods.add(qual)
                continue  # items inside a function body are not items
            if t == "macro_invocation" and node.parent is not None and node.parent.type in (
                "source_file", "declaration_list"
            ):
                tree = next((c for c in node.named_children if c.type == "token_tree"), None)
                if tree is not None and tree.text.startswith(b"{"):
                    # Re-parse the body in place: everything else blanked, rows kept.
                    blank = bytearray(b if b in (10, 13) else 32 for b in data)
                    s, e = tree.start_byte + 1, tree.end_byte - 1
                    blank[s:e] = data[s:e]
                    todo.append((PARSER.parse(bytes(blank)).root_node, mods, here_test))
                continue
            sub = mods
            if t == "mod_item" and node.child_by_field_name("body") is not None:
                sub = mods + [node.child_by_field_name("name").text.decode()]
            for c in reversed(node.named_children):
                todo.append((c, sub, here_test))

    def _item(self, node, mods):
        """Records an item as ../shared/eval lists them: kind, name, qualified name, lines (its
        doc comments and attributes apart)."""
        t = node.type
        owner = owner_of(node)
        if t == "impl_item":
            ty = node.child_by_field_name("type")
            trait = node.child_by_field_name("trait")
            tname = re.sub(r"<.*", "", ty.text.decode()) if ty is not None else "?"
            name = f"impl {trait.text.decode()} for {tname}" if trait is not None else f"impl {tname}"
        else:
            field = node.child_by_field_name("name")
            if field is None:
                return
            name = field.text.decode() + ("!" if t == "macro_definition" else "")
        if t == "function_item":
            kind = "method" if owner else "function"
        elif owner:
            return  # an impl's consts and types are not items there
        else:
            kind = ITEM_KINDS[t]
        if t == "mod_item" and node.child_by_field_name("body") is None:
            return  # `mod x;` is the file, not an item
        qual = f"{owner}::{name}" if owner else name
        if mods and owner is None:
            qual = "::".join(mods) + "::" + qual
        start = node.start_point.row
        prev = node.prev_named_sibling
        while prev is not None and (
            prev.type == "attribute_item"
            or (prev.type == "line_comment" and prev.text.startswith(b"///"))
        ) and prev.end_point.row >= start - 1:
            start = prev.start_point.row
            prev = prev.prev_named_sibling
        self.items.append(dict(
            kind=kind, name=name, qualname=qual, start_line=node.start_point.row + 1,
            end_line=node.end_point.row + 1, doc_start_line=start + 1,
        ))

    def classify(self, row, line):
        """('skip', None), ('fn', key) or ('outside', None) for one changed row."""
        text = line.decode(errors="replace")
        if not text.strip() or row in self.ignore_rows or row in self.test_rows:
            return "skip", None
        spans = self.comment_cols.get(row, [])
        rest = "".join(
            ch for col, ch in enumerate(text) if not any(a <= col < b for a, b in spans)
        )
        if not rest.strip():
            return "skip", None
        key = self.row_fn.get(row)
        if key is not None:
            return "fn", key
        return "outside", None


def localize(old_files, new_files, head_files):
    """(fate, gold) for one release: the functions it changed, located in the head package."""
    changed = sorted(
        rel for rel in set(old_files) | set(new_files)
        if rel.endswith(".rs") and old_files.get(rel) != new_files.get(rel)
    )
    if not changed:
        return "no_rs_change", None
    if len(changed) > 6:
        return "too_many_rs_files", None
    corpus = [rel for rel in changed if not NOT_CORPUS.search(rel)]
    if not corpus:
        return "no_src_rs_change", None
    touched = []
    for rel in corpus:
        if rel not in old_files or rel not in new_files:
            return "file_added_or_deleted", None
        old_b, new_b = old_files[rel], new_files[rel]
        old_p, new_p = FileParse(old_b), FileParse(new_b)
        old_l, new_l = old_b.split(b"\n"), new_b.split(b"\n")
        sm = difflib.SequenceMatcher(None, old_l, new_l, autojunk=False)
        keys = set()
        for op, i1, i2, j1, j2 in sm.get_opcodes():
            if op == "equal":
                continue
            for side, parse, lines, a, b in ((0, old_p, old_l, i1, i2), (1, new_p, new_l, j1, j2)):
                for row in range(a, b):
                    kind, key = parse.classify(row, lines[row])
                    if kind == "outside":
                        return "outside_fn", None
                    if kind == "fn":
                        if side == 0 and new_p.counts[key[0]] != old_p.counts[key[0]]:
                            return "fn_removed_or_renamed", None
                        keys.add(key)
        for key in sorted(keys):
            touched.append((rel, key, new_p))
    if not touched:
        return "no_fn_touched", None
    if len(touched) > 3:
        return "too_many_fns", None
    gold = []
    for rel, (qual, copy), new_p in touched:
        if rel not in head_files:
            return "gold_not_at_head", None
        head_p = FileParse(head_files[rel])
        if head_p.counts[qual] == 0:
            return "gold_not_at_head", None
        if head_p.counts[qual] != new_p.counts[qual]:
            return "gold_ambiguous_at_head", None
        _, a, b, _ = next(f for f in head_p.fns if f[0] == (qual, copy))
        gold.append(dict(
            file=rel, qualname=qual, kind="method" if qual in head_p.methods else "function",
            start_line=a + 1, end_line=b + 1,
        ))
    return "candidate", gold


def writes_name(name, text):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", text, re.I) is not None


def main():
    work = os.path.abspath(sys.argv[1])
    cache = os.path.join(work, "cache")
    os.makedirs(cache, exist_ok=True)
    os.makedirs(os.path.join(work, "items"), exist_ok=True)
    queries, paths, fates = [], {}, {}
    for crate, newest in CRATES.items():
        fate = fates.setdefault(crate, Counter())
        versions = releases(cache, crate, newest)
        head = package(cache, crate, newest)
        seen_queries = {}
        prev_files = package(cache, crate, versions[0])
        for prev, cur in zip(versions, versions[1:]):
            cur_files = package(cache, crate, cur)
            old_files, prev_files = prev_files, cur_files
            log = changelog(cur_files) or changelog(head)
            lines = section(log, cur) if log else None
            if lines is None:
                fate["no_section"] += 1
                continue
            found, _prose = entries(lines)
            kept = [e for e in found if not SUBJECT_DROP.search(e) and not NOT_A_CHANGE.search(e)]
            if len(found) == 0:
                fate["no_entry"] += 1
                continue
            if not kept:
                fate["subject_filter"] += 1
                continue
            if len(kept) > MAX_ENTRIES:
                fate["too_many_entries"] += 1
                continue
            query = ". ".join(c for c in (clean(e) for e in kept) if c)
            if len(query.split()) < 5:
                fate["short_message"] += 1
                continue
            result, gold = localize(old_files, cur_files, head)
            fate[result] += 1
            if gold is None:
                continue
            split = "easy" if any(writes_name(g["qualname"].split("::")[-1], query) for g in gold) else "main"
            seen_queries[query] = dict(
                id=f"{crate}-{cur}", repo=crate, crate=crate, version=newest, release=cur,
                previous=prev, query=query, gold=gold, split=split,
            )
        for q in seen_queries.values():
            queries.append(q)
            fate[f"pool_{q['split']}"] += 1
        print(crate, dict(sorted(fate.items())), file=sys.stderr)
        if not seen_queries:
            continue
        dest = os.path.join(work, "sources", crate)
        shutil.rmtree(dest, ignore_errors=True)
        for rel, data in head.items():
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            with open(os.path.join(dest, rel), "wb") as f:
                f.write(data)
        with open(os.path.join(work, "items", f"{crate}.jsonl"), "w") as f:
            for rel in sorted(head):
                if rel.endswith(".rs") and not NOT_CORPUS.search(rel):
                    for it in FileParse(head[rel]).items:
                        f.write(json.dumps(dict(
                            id=f"{crate}:{rel}:{it['start_line']}-{it['end_line']}:{it['name']}",
                            repo=crate, file=rel, **it,
                        )) + "\n")
        paths[crate] = dest
    with open(os.path.join(work, "queries.jsonl"), "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    with open(os.path.join(work, "paths.json"), "w") as f:
        json.dump(paths, f, indent=1)
    with open(os.path.join(work, "fates.json"), "w") as f:
        json.dump({c: dict(sorted(v.items())) for c, v in fates.items()}, f, indent=1)
    splits = Counter(q["split"] for q in queries)
    print(f"changelog: {len(queries)} queries ({splits['main']} main, {splits['easy']} easy) over "
          f"{len(paths)} crates -> {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
