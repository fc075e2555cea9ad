#!/usr/bin/env python3
"""Builds the Rust doc -> function set: the first sentence of a documented function's or
method's `///` comment is the query, the function is the gold, and the whole doc comment is
blanked out of the indexed copy (spaces, so lines and bytes keep their places). A query that
writes the function's own name is left out: these describe what a function does, as most
commit messages of ../shared/eval's `main` split do, on crates nobody tuned for (this
workspace's own dependencies, so `cargo fetch` has them).

  build.py WORK_DIR     writes WORK_DIR/sources/<crate>/ (the masked copies: Cargo.toml and
                        src/), WORK_DIR/paths.json, WORK_DIR/items/<crate>.jsonl (the corpus
                        files) and WORK_DIR/queries.jsonl

Needs the PyPI packages tree_sitter and tree_sitter_rust (scripts/eval-rust-docs installs them
pinned into a venv). Seeded: the same set on every machine.
"""
import importlib.util
import json
import os
import random
import re
import shutil
import sys

import tree_sitter as ts
import tree_sitter_rust

# The names probe's crates, found the same way (its build.py, beside this folder).
_spec = importlib.util.spec_from_file_location(
    "names_probe", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "names-probe", "build.py")
)
_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_probe)
CRATES, roots = _probe.CRATES, _probe.roots

PER_CRATE = 40
SEED = 20261126
MIN_WORDS, MAX_WORDS = 4, 40
PARSER = ts.Parser(ts.Language(tree_sitter_rust.language()))


def doc_run(node):
    """The `///` lines above a function (attributes between them and it allowed): their nodes."""
    docs, prev = [], node.prev_named_sibling
    while prev is not None and prev.type in ("line_comment", "attribute_item"):
        if prev.type == "line_comment":
            if prev.child_by_field_name("outer") is None and not prev.text.startswith(b"///"):
                break
            if prev.text.startswith(b"////"):
                break
            docs.append(prev)
        prev = prev.prev_named_sibling
    docs.reverse()
    return docs


def owner_of(node):
    """`Type` of the impl or trait a function is in, or None at module level."""
    parent = node.parent
    if parent is not None and parent.type == "declaration_list":
        holder = parent.parent
        if holder is not None and holder.type == "impl_item":
            ty = holder.child_by_field_name("type")
            return re.sub(r"<.*", "", ty.text.decode()) if ty is not None else "?"
        if holder is not None and holder.type == "trait_item":
            return holder.child_by_field_name("name").text.decode()
    return None


def in_tests(node):
    """Whether the node is inside a `mod tests` / `mod test`."""
    parent = node.parent
    while parent is not None:
        if parent.type == "mod_item":
            name = parent.child_by_field_name("name")
            if name is not None and name.text in (b"tests", b"test"):
                return True
        parent = parent.parent
    return False


def units(data):
    """Documented functions and methods: name, owner, lines, doc text, doc bytes; `body` is
    False for a trait's declaration without one (its doc still counts when telling sentences
    apart)."""
    out, stack = [], [PARSER.parse(data).root_node]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.named_children))
        if node.type not in ("function_item", "function_signature_item") or in_tests(node):
            continue
        docs = doc_run(node)
        if not docs:
            continue
        text = "\n".join(d.text.decode(errors="replace")[3:].strip() for d in docs)
        out.append(dict(
            body=node.type == "function_item",
            name=node.child_by_field_name("name").text.decode(),
            owner=owner_of(node),
            start_line=node.start_point.row + 1,
            end_line=node.end_point.row + 1,
            doc=text,
            mask=[(d.start_byte, d.end_byte) for d in docs],
        ))
    return out


def first_sentence(doc):
    para = []
    for line in doc.split("\n"):
        s = line.strip()
        if not s:
            if para:
                break
            continue
        if s.startswith(("#", "```", "-", "*", "|")):
            break
        para.append(s)
    text = re.sub(r"\s+", " ", " ".join(para)).strip()
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)\.(\s|$)", text)
    return text[: m.start() + 1] if m else text


def writes_name(name, text):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", text, re.I) is not None


def mask(data, ranges):
    buf = bytearray(data)
    for start, end in ranges:
        for k in range(start, end):
            if buf[k] not in (10, 13):
                buf[k] = 32
    return bytes(buf)


def main():
    work = sys.argv[1]
    workspace = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = roots(workspace)
    rng = random.Random(SEED)
    queries, paths = [], {}
    os.makedirs(os.path.join(work, "items"), exist_ok=True)
    for crate in CRATES:
        root = found[crate]
        files = []
        for dirpath, dirnames, names in os.walk(os.path.join(root, "src")):
            dirnames.sort()
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in sorted(names) if n.endswith(".rs")]
        candidates, texts = [], {}
        counts = {}
        for rel in files:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
            texts[rel] = data
            in_test_dir = any(part in ("tests", "test", "benches") for part in rel.split("/"))
            for u in units(data):
                q = first_sentence(u["doc"])
                # A sentence two functions share (a trait's declaration and its impl) tells
                # them apart from nothing.
                counts[q] = counts.get(q, 0) + 1
                words = len(q.split())
                if (u["body"] and not in_test_dir and MIN_WORDS <= words <= MAX_WORDS
                        and not writes_name(u["name"], q)):
                    candidates.append((rel, u, q))
        candidates = [c for c in candidates if counts[c[2]] == 1]
        rng.shuffle(candidates)
        picked = candidates[:PER_CRATE]
        masks = {}
        for rel, u, q in picked:
            masks.setdefault(rel, []).extend(u["mask"])
            qualname = f"{u['owner']}::{u['name']}" if u["owner"] else u["name"]
            queries.append(dict(
                id=f"{crate}:{rel}:{qualname}:{u['start_line']}", repo=crate, crate=crate, split="main",
                query=q,
                gold=[dict(file=rel, qualname=qualname, kind="method" if u["owner"] else "function",
                           start_line=u["start_line"], end_line=u["end_line"])],
            ))
        dest = os.path.join(work, "sources", crate)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        shutil.copy(os.path.join(root, "Cargo.toml"), os.path.join(dest, "Cargo.toml"))
        for rel in files:
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            data = mask(texts[rel], masks[rel]) if rel in masks else texts[rel]
            with open(os.path.join(dest, rel), "wb") as f:
                f.write(data)
        with open(os.path.join(work, "items", f"{crate}.jsonl"), "w") as f:
            for rel in files:
                f.write(json.dumps({"file": rel}) + "\n")
        paths[crate] = os.path.abspath(dest)
    with open(os.path.join(work, "queries.jsonl"), "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    with open(os.path.join(work, "paths.json"), "w") as f:
        json.dump(paths, f, indent=1)
    print(f"rust docs: {len(queries)} queries over {len(paths)} crates -> {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
