#!/usr/bin/env python3
"""Build the polyglot docstring -> function retrieval set (Python, TypeScript/JavaScript, Go).

usage: python build.py [--work DIR] [--packages packages.json] [--baseline] [--score-py PATH]

For every package of packages.json:
  1. downloads it from its registry into WORK/downloads/ (kept when its sha256 matches; a file
     whose sha256 differs is refused), unpacks a pristine copy into WORK/pristine/<repo>/;
  2. selects the corpus files (include/exclude globs relative to the package's `root`);
  3. extracts functions and methods that carry a docstring / doc comment (Python: `ast`;
     TypeScript/JavaScript and Go: tree-sitter) and turns the doc's first sentence into a query;
  4. drops short/long/ambiguous queries, samples at most N per package (fixed seed);
  5. writes the masked corpus WORK/sources/<repo>/ (the doc of every queried function replaced by
     spaces, byte offsets and line numbers unchanged), WORK/paths.json, WORK/queries.jsonl and
     WORK/items/<repo>.jsonl, and prints a summary table.
With --baseline it also writes WORK/runs/grep_bm25.jsonl (a plain BM25 over every
function/method/class of the masked corpus) and scores it with the Rust set's score.py.

Needs Python >= 3.11 with the PyPI packages tree_sitter, tree_sitter_go, tree_sitter_typescript
and tree_sitter_javascript (scripts/eval-polyglot installs the pinned versions into a venv);
Debian packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x` (with a
pure-Python fallback for both).
"""
import argparse
import ast
import base64
import hashlib
import io
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_WORK = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                            "ploke-eval", "polyglot")
DEFAULT_SCORE = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "eval", "score.py"))
DEBIAN_MIRROR = "https://deb.debian.org/debian/"
UA = "ploke-eval-polyglot/1 (+build.py)"


# --------------------------------------------------------------------------------------------
# fetching and unpacking


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def http_get(url, dest):
    req = urllib.request.Request(url, headers={"User-Agent": UA})
    tmp = dest + ".part"
    with urllib.request.urlopen(req, timeout=120) as r, open(tmp, "wb") as out:
        shutil.copyfileobj(r, out)
    os.replace(tmp, dest)


def check_npm_integrity(path, integrity):
    algo, _, b64 = integrity.partition("-")
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        h.update(f.read())
    if base64.b64encode(h.digest()).decode() != b64:
        sys.exit(f"{path}: npm integrity mismatch (expected {integrity})")


def fetch(pkg, downloads):
    """Returns the path of the verified download of pkg."""
    os.makedirs(downloads, exist_ok=True)
    dest = os.path.join(downloads, pkg["filename"])
    if os.path.exists(dest):
        got = sha256_file(dest)
        if got != pkg["sha256"]:
            sys.exit(f"{dest}: sha256 {got} != pinned {pkg['sha256']}; refusing to use it "
                     f"(delete the file to download it again)")
        return dest
    src = pkg["source"]
    if src in ("pypi", "npm"):
        print(f"fetching {pkg['url']}", file=sys.stderr)
        http_get(pkg["url"], dest)
    elif src == "debian":
        spec = f"{pkg['name']}={pkg['version']}"
        print(f"apt-get download {spec}", file=sys.stderr)
        ok = False
        if shutil.which("apt-get"):
            r = subprocess.run(["apt-get", "download", "-q", spec], cwd=downloads,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode == 0:
                # apt names the file <name>_<version without epoch>_<arch>.deb; '~' and ':' may be
                # %-escaped depending on the apt version
                for cand in os.listdir(downloads):
                    if cand.endswith(".deb") and cand.replace("%7e", "~").replace("%7E", "~") == pkg["filename"]:
                        if cand != pkg["filename"]:
                            os.replace(os.path.join(downloads, cand), dest)
                        ok = os.path.exists(dest)
            else:
                print(r.stderr.strip(), file=sys.stderr)
        if not ok:
            url = DEBIAN_MIRROR + pkg["pool_path"]
            print(f"apt-get download failed or unavailable; fetching {url}", file=sys.stderr)
            http_get(url, dest)
    else:
        sys.exit(f"unknown source {src!r}")
    got = sha256_file(dest)
    if got != pkg["sha256"]:
        os.replace(dest, dest + ".bad")
        sys.exit(f"{pkg['filename']}: downloaded sha256 {got} != pinned {pkg['sha256']} "
                 f"(kept as {dest}.bad)")
    if pkg.get("integrity"):
        check_npm_integrity(dest, pkg["integrity"])
    return dest


def deb_data_tar(path):
    """The data.tar.* member of a .deb (an `ar` archive), as a tarfile (pure-Python fallback)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"!<arch>\n":
        sys.exit(f"{path}: not a .deb")
    pos = 8
    while pos + 60 <= len(data):
        hdr = data[pos:pos + 60]
        name = hdr[:16].decode().strip().rstrip("/")
        size = int(hdr[48:58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                sys.exit(f"{path}: data.tar.zst needs dpkg-deb")
            return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
    sys.exit(f"{path}: no data.tar member")


def extract_all(t, dest):
    try:
        t.extractall(dest, filter="data")
    except TypeError:  # Python without tarfile filters (< 3.11.4)
        t.extractall(dest)


def unpack_deb(archive, dest):
    """Unpacks a .deb's files into dest (`dpkg-deb -x`, or the pure-Python fallback)."""
    if shutil.which("dpkg-deb"):
        subprocess.check_call(["dpkg-deb", "-x", archive, dest])
    else:
        with deb_data_tar(archive) as t:
            extract_all(t, dest)


def unpack(pkg, archive, pristine_root):
    """Unpacks archive into pristine_root/<repo>/ (once; a stamp records the archive's sha256).
    Returns the package root directory inside it."""
    dest = os.path.join(pristine_root, pkg["repo"])
    stamp = os.path.join(dest, ".pristine-sha256")
    if not (os.path.exists(stamp) and open(stamp).read().strip() == pkg["sha256"]):
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        if pkg["source"] == "debian":
            unpack_deb(archive, dest)
        else:
            with tarfile.open(archive, "r:*") as t:
                extract_all(t, dest)
        with open(stamp, "w") as f:
            f.write(pkg["sha256"] + "\n")
    root = os.path.join(dest, pkg["root"])
    if not os.path.isdir(root):
        sys.exit(f"{pkg['repo']}: root {pkg['root']!r} not found in {archive}")
    return root


# --------------------------------------------------------------------------------------------
# corpus file selection


def glob_re(pattern):
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def corpus_files(root, include, exclude):
    inc = [glob_re(p) for p in include]
    exc = [glob_re(p) for p in exclude]
    files = []
    for d, dirs, names in os.walk(root):
        dirs.sort()
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
            if any(r.match(rel) for r in inc) and not any(r.match(rel) for r in exc):
                files.append(rel)
    return sorted(files)


# --------------------------------------------------------------------------------------------
# units and docs
#
# A unit is a dict: kind (function|method|class|type), name, qualname, start_line, end_line
# (1-based inclusive, the declaration itself), doc_start_line, and for documented
# functions/methods: doc (the cleaned doc text) and mask (list of (start_byte, end_byte) ranges to
# blank when the function is queried).


def line_starts(data):
    starts = [0]
    for m in re.finditer(b"\n", data):
        starts.append(m.end())
    return starts


def is_test_name(name):
    return name.startswith("test") or name.startswith("Test")


# ---- Python


def py_string_literal_ranges(data, start, end):
    """Inner byte ranges (between the quotes) of the string literal tokens in data[start:end]
    (a docstring may be an implicit concatenation of several literals)."""
    out, i = [], start
    while i < end:
        c = data[i:i + 1]
        if c in (b" ", b"\t", b"\n", b"\r", b"\f", b"(", b")"):
            i += 1
            continue
        if c == b"\\" and data[i + 1:i + 2] in (b"\n", b"\r"):
            i += 2
            continue
        if c == b"#":
            while i < end and data[i:i + 1] != b"\n":
                i += 1
            continue
        j = i
        while j < end and data[j:j + 1].isalpha():
            j += 1
        q = data[j:j + 3] if data[j:j + 3] in (b'"""', b"'''") else data[j:j + 1]
        if q not in (b'"""', b"'''", b'"', b"'"):
            raise ValueError(f"unexpected byte {data[j:j + 1]!r} in docstring at {j}")
        k = j + len(q)
        s = k
        while True:
            if k >= end:
                raise ValueError("unterminated docstring literal")
            if data[k:k + 1] == b"\\":
                k += 2
                continue
            if data[k:k + len(q)] == q:
                break
            k += 1
        out.append((s, k))
        i = k + len(q)
    return out


def py_units(data, relpath):
    tree = ast.parse(data, filename=relpath)
    starts = line_starts(data)
    units = []

    def boff(lineno, col):
        return starts[lineno - 1] + col

    def visit(body, prefix, in_class):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + node.name
                u = dict(kind="method" if in_class else "function", name=node.name, qualname=q,
                         start_line=node.lineno, end_line=node.end_lineno,
                         doc_start_line=node.decorator_list[0].lineno if node.decorator_list else node.lineno)
                doc = ast.get_docstring(node, clean=True)
                first = node.body[0] if node.body else None
                if doc and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                        and isinstance(first.value.value, str):
                    c = first.value
                    u["doc"] = doc
                    u["mask_mode"] = "py"
                    u["mask"] = py_string_literal_ranges(data, boff(c.lineno, c.col_offset),
                                                         boff(c.end_lineno, c.end_col_offset))
                    u["doc_lines"] = (c.lineno, c.end_lineno)
                units.append(u)
            elif isinstance(node, ast.ClassDef):
                q = prefix + node.name
                units.append(dict(kind="class", name=node.name, qualname=q, start_line=node.lineno,
                                  end_line=node.end_lineno,
                                  doc_start_line=node.decorator_list[0].lineno if node.decorator_list else node.lineno))
                visit(node.body, q + ".", True)
            elif isinstance(node, (ast.If, ast.Try, ast.With)) or node.__class__.__name__ == "TryStar":
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, []) or [], prefix, in_class)
                for h in getattr(node, "handlers", []) or []:
                    visit(h.body, prefix, in_class)

    visit(tree.body, "", False)
    return units


def mask_py(data, ranges):
    """Blanks the inner bytes of string literals; newlines (and a backslash right before a
    newline, which would otherwise leave a raw newline in a one-quote literal) are kept."""
    buf = bytearray(data)
    for s, e in ranges:
        for k in range(s, e):
            b = buf[k]
            if b in (10, 13):
                continue
            if b == 92 and k + 1 < e and data[k + 1] in (10, 13):
                continue
            buf[k] = 32
    return bytes(buf)


# ---- tree-sitter (TypeScript / JavaScript / Go)

_TS = {}


def ts_parser(lang):
    if lang not in _TS:
        import tree_sitter as ts
        if lang == "typescript":
            import tree_sitter_typescript as m
            L = ts.Language(m.language_typescript())
        elif lang == "tsx":
            import tree_sitter_typescript as m
            L = ts.Language(m.language_tsx())
        elif lang == "javascript":
            import tree_sitter_javascript as m
            L = ts.Language(m.language())
        elif lang == "go":
            import tree_sitter_go as m
            L = ts.Language(m.language())
        else:
            raise ValueError(lang)
        _TS[lang] = ts.Parser(L)
    return _TS[lang]


def lang_of(relpath, language):
    if language == "go":
        return "go"
    if relpath.endswith(".tsx"):
        return "tsx"
    if relpath.endswith((".ts", ".mts", ".cts")):
        return "typescript"
    return "javascript"


def node_text(n):
    return n.text.decode("utf-8", "replace")


FUNC_VALUES = {"arrow_function", "function_expression", "function", "generator_function"}
JS_FUNC_DECLS = {"function_declaration", "generator_function_declaration"}
JS_CLASS_DECLS = {"class_declaration", "abstract_class_declaration", "class"}


def jsdoc_above(anchor):
    """The `/** ... */` comment right before anchor, or None. Like TypeScript's own JSDoc
    attachment, blank lines may separate the two (commander's style) but nothing else may."""
    prev = anchor.prev_sibling
    if prev is None or prev.type != "comment":
        return None
    t = prev.text
    if not t.startswith(b"/**") or t.startswith(b"/**/"):
        return None
    return prev


INLINE_TAG = re.compile(r"\{@(?:link|linkcode|linkplain|code)\s+([^}|\s]+)(?:\s*\|\s*|\s+)?([^}]*)\}")


def clean_jsdoc(text):
    body = text[3:-2] if text.endswith("*/") else text[3:]
    lines = []
    for line in body.split("\n"):
        line = re.sub(r"^\s*\*(?!/) ?", "", line.rstrip())
        if line.strip().startswith("@"):
            break  # block tags (@param, @returns, @example, ...) end the description
        lines.append(line)
    out = "\n".join(lines)
    out = INLINE_TAG.sub(lambda m: (m.group(2).strip() or m.group(1)), out)
    return out.strip("\n")


def js_units(data, relpath, lang):
    tree = ts_parser(lang).parse(data)
    units = []

    def add(kind, name, qualname, node, anchor):
        u = dict(kind=kind, name=name, qualname=qualname, start_line=anchor.start_point.row + 1,
                 end_line=node.end_point.row + 1, doc_start_line=anchor.start_point.row + 1)
        if kind in ("function", "method"):
            c = jsdoc_above(anchor)
            if c is not None:
                doc = clean_jsdoc(node_text(c))
                if doc.strip():
                    u["doc"] = doc
                    u["mask_mode"] = "comment"
                    u["mask"] = [(c.start_byte, c.end_byte)]
                    u["doc_lines"] = (c.start_point.row + 1, c.end_point.row + 1)
                u["doc_start_line"] = c.start_point.row + 1
        units.append(u)

    def class_body(cls, cname):
        body = cls.child_by_field_name("body")
        if body is None:
            return
        for m in body.named_children:
            if m.type == "method_definition":
                n = m.child_by_field_name("name")
                if n is None or m.child_by_field_name("body") is None:
                    continue
                name = node_text(n)
                add("method", name, f"{cname}.{name}", m, m)
            elif m.type in ("public_field_definition", "field_definition"):
                v = m.child_by_field_name("value")
                n = m.child_by_field_name("name") or m.child_by_field_name("property")
                if v is not None and n is not None and v.type in FUNC_VALUES:
                    name = node_text(n)
                    add("method", name, f"{cname}.{name}", m, m)

    def top(stmt, anchor):
        t = stmt.type
        if t in JS_FUNC_DECLS:
            n = stmt.child_by_field_name("name")
            if n is not None:
                add("function", node_text(n), node_text(n), stmt, anchor)
        elif t in JS_CLASS_DECLS:
            n = stmt.child_by_field_name("name")
            cname = node_text(n) if n is not None else "default"
            add("class", cname, cname, stmt, anchor)
            class_body(stmt, cname)
        elif t in ("lexical_declaration", "variable_declaration"):
            decls = [d for d in stmt.named_children if d.type == "variable_declarator"]
            for d in decls:
                n, v = d.child_by_field_name("name"), d.child_by_field_name("value")
                if n is None or v is None or n.type != "identifier":
                    continue
                if v.type in FUNC_VALUES:
                    # the doc comment belongs to the statement only when it declares one name
                    add("function", node_text(n), node_text(n), stmt if len(decls) == 1 else d,
                        anchor if len(decls) == 1 else d)
                elif v.type in JS_CLASS_DECLS:
                    add("class", node_text(n), node_text(n), stmt, anchor)
                    class_body(v, node_text(n))

    for stmt in tree.root_node.named_children:
        if stmt.type == "export_statement":
            inner = stmt.child_by_field_name("declaration")
            if inner is None:
                inner = next((c for c in stmt.named_children
                              if c.type in JS_FUNC_DECLS | JS_CLASS_DECLS | {"lexical_declaration", "variable_declaration"}), None)
            if inner is not None:
                top(inner, stmt)
        else:
            top(stmt, stmt)
    return units


GO_DIRECTIVE = re.compile(r"^//(go:|line |export |extern |nolint|lint:)")


def go_doc_above(decl):
    """The run of `//` comment lines directly above decl (each on its own line)."""
    run = []
    row = decl.start_point.row
    prev = decl.prev_sibling
    while prev is not None and prev.type == "comment" and prev.text.startswith(b"//") \
            and prev.end_point.row == row - 1:
        before = prev.prev_sibling
        if before is not None and before.end_point.row == prev.start_point.row:
            break  # a trailing comment of the previous line
        run.append(prev)
        row = prev.start_point.row
        prev = before
    run.reverse()
    return run


def go_recv_type(decl):
    recv = decl.child_by_field_name("receiver")
    if recv is None:
        return "?"
    for p in recv.named_children:
        if p.type == "parameter_declaration":
            t = p.child_by_field_name("type")
            while t is not None and t.type in ("pointer_type", "generic_type", "parenthesized_type"):
                t = t.child_by_field_name("type") or (t.named_children[0] if t.named_children else None)
            if t is not None:
                return node_text(t)
    return "?"


def go_units(data, relpath):
    tree = ts_parser("go").parse(data)
    units = []
    for d in tree.root_node.named_children:
        if d.type in ("function_declaration", "method_declaration"):
            n = d.child_by_field_name("name")
            if n is None or d.child_by_field_name("body") is None:
                continue
            name = node_text(n)
            q = name if d.type == "function_declaration" else f"{go_recv_type(d)}.{name}"
            u = dict(kind="function" if d.type == "function_declaration" else "method", name=name,
                     qualname=q, start_line=d.start_point.row + 1, end_line=d.end_point.row + 1,
                     doc_start_line=d.start_point.row + 1)
            run = go_doc_above(d)
            if run:
                lines = []
                for c in run:
                    t = node_text(c)
                    if GO_DIRECTIVE.match(t):
                        continue
                    t = t[2:]
                    lines.append(t[1:] if t.startswith(" ") else t)
                doc = "\n".join(lines).strip("\n")
                if doc.strip():
                    u["doc"] = doc
                    u["mask_mode"] = "comment"
                    u["mask"] = [(c.start_byte, c.end_byte) for c in run]
                    u["doc_lines"] = (run[0].start_point.row + 1, run[-1].end_point.row + 1)
                u["doc_start_line"] = run[0].start_point.row + 1
            units.append(u)
        elif d.type == "type_declaration":
            for s in d.named_children:
                if s.type in ("type_spec", "type_alias"):
                    n = s.child_by_field_name("name")
                    if n is None:
                        continue
                    units.append(dict(kind="type", name=node_text(n), qualname=node_text(n),
                                      start_line=d.start_point.row + 1, end_line=d.end_point.row + 1,
                                      doc_start_line=d.start_point.row + 1))
    return units


def mask_comment(data, ranges):
    buf = bytearray(data)
    for s, e in ranges:
        for k in range(s, e):
            if buf[k] not in (10, 13):
                buf[k] = 32
    return bytes(buf)


def write_if_changed(path, data):
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def remove_stale(root, keep):
    for d, dirs, names in os.walk(root, topdown=False):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/")
            if rel not in keep:
                os.remove(os.path.join(d, n))
        if d != root and not os.listdir(d):
            os.rmdir(d)


# --------------------------------------------------------------------------------------------
# queries

ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|resp|ca)|\.\.)\.\Z", re.I)
PARA_STOP = re.compile(r"^(?:@|:param|:arg|:key|:type|:raise|:return|:rtype|:ivar|:cvar|:var|"
                       r":meta|:yield|>>>|\.\. |```|Args:|Arguments:|Parameters:|Returns:|Raises:|"
                       r"Example:|Examples:|Deprecated:)")
HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")


def name_in(name, text):
    """Whether text contains the function's name as a whole word (case-insensitive)."""
    return re.search(r"(?<![A-Za-z0-9_$])" + re.escape(name) + r"(?![A-Za-z0-9_$])", text, re.I) is not None


def first_sentence(doc, language):
    para = []
    for line in doc.split("\n"):
        s = line.strip()
        if not s:
            if para:
                break
            continue
        if PARA_STOP.match(s):
            break
        para.append(s)
    text = " ".join(para)
    if language in ("typescript", "javascript"):
        text = HTML_TAG.sub("", text)
    text = re.sub(r"\s+", " ", text).strip()
    for m in re.finditer(r"\.(?=\s|\Z)", text):
        cand = text[:m.end()]
        if ABBREV.search(cand):
            continue
        return cand
    return text


# --------------------------------------------------------------------------------------------
# baseline: BM25 over every function/method/class of the masked corpus

CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def tokens(text):
    out = []
    for word in re.findall(r"[A-Za-z0-9]+", text):
        out.extend(p.lower() for p in CAMEL.findall(word))
    return out


class BM25:
    def __init__(self, docs, k1=1.2, b=0.75):
        self.k1, self.b = k1, b
        self.n = len(docs)
        self.len = [len(d) for d in docs]
        self.avg = (sum(self.len) / self.n) if self.n else 1.0
        self.post = defaultdict(list)
        for i, d in enumerate(docs):
            for t, c in Counter(d).items():
                self.post[t].append((i, c))

    def search(self, query_tokens):
        scores = defaultdict(float)
        for t in dict.fromkeys(query_tokens):
            p = self.post.get(t)
            if not p:
                continue
            idf = math.log(1 + (self.n - len(p) + 0.5) / (len(p) + 0.5))
            for i, c in p:
                scores[i] += idf * c * (self.k1 + 1) / (c + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
        return scores


def run_baseline(work, packages, queries, items_by_repo, score_py):
    runs = os.path.join(work, "runs")
    os.makedirs(runs, exist_ok=True)
    out_path = os.path.join(runs, "grep_bm25.jsonl")
    by_repo = defaultdict(list)
    for q in queries:
        by_repo[q["repo"]].append(q)
    with open(out_path, "w") as out:
        for pkg in packages:
            repo = pkg["repo"]
            src_root = os.path.join(work, "sources", repo)
            units = [u for u in items_by_repo[repo] if u["kind"] != "file"]
            cache = {}
            docs = []
            for u in units:
                if u["file"] not in cache:
                    with open(os.path.join(src_root, u["file"]), "rb") as f:
                        cache[u["file"]] = f.read().decode("utf-8", "replace").split("\n")
                lines = cache[u["file"]][u["doc_start_line"] - 1:u["end_line"]]
                docs.append(tokens(u["name"] + " " + u["qualname"] + " " + "\n".join(lines)))
            index = BM25(docs)
            for q in by_repo[repo]:
                sc = index.search(tokens(q["query"]))
                order = sorted(sc, key=lambda i: (-sc[i], units[i]["file"], units[i]["start_line"],
                                                  units[i]["end_line"]))[:10]
                ranked = [dict(file=units[i]["file"], start_line=units[i]["start_line"],
                               end_line=units[i]["end_line"], qualname=units[i]["qualname"],
                               kind=units[i]["kind"], score=round(sc[i], 4)) for i in order]
                out.write(json.dumps(dict(id=q["id"], ranked=ranked)) + "\n")
    print(f"\nbaseline run: {out_path}")
    if not os.path.exists(score_py):
        print(f"(score.py not found at {score_py}; pass --score-py)")
        return
    qpath = os.path.join(work, "queries.jsonl")
    for extra in ([], ["--strict"]):
        subprocess.run([sys.executable, score_py, out_path, "--split", "all", "--queries", qpath] + extra,
                       check=True)


# --------------------------------------------------------------------------------------------


def command_line(doc, default_work, packages_json):
    """The command line of a set builder (this one and ../patches/build.py): the parsed
    arguments, the absolute work dir, packages.json and its packages (those `--only` names)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=default_work)
    ap.add_argument("--packages", default=packages_json)
    ap.add_argument("--only", default=None, help="comma-separated repos to build (debugging)")
    ap.add_argument("--baseline", action="store_true", help="also write and score runs/grep_bm25.jsonl")
    ap.add_argument("--score-py", default=DEFAULT_SCORE)
    a = ap.parse_args()
    work = os.path.abspath(os.path.expanduser(a.work))
    spec = json.load(open(a.packages))
    packages = spec["packages"]
    if a.only:
        keep = set(a.only.split(","))
        packages = [p for p in packages if p["repo"] in keep]
    return a, work, spec, packages


def main():
    a, work, spec, packages = command_line(__doc__, DEFAULT_WORK, os.path.join(HERE, "packages.json"))
    t0 = time.time()
    seed = spec["seed"]
    max_q = spec["max_queries_per_package"]
    min_words, max_chars = spec["min_query_words"], spec["max_query_chars"]
    gexc = spec.get("global_exclude", [])

    downloads = os.path.join(work, "downloads")
    os.makedirs(os.path.join(work, "items"), exist_ok=True)
    sources = os.path.join(work, "sources")
    all_queries, items_by_repo, paths, stats = [], {}, {}, []

    for pkg in packages:
        repo, language = pkg["repo"], pkg["language"]
        archive = fetch(pkg, downloads)
        root = unpack(pkg, archive, os.path.join(work, "pristine"))
        files = corpus_files(root, pkg["include"], pkg.get("exclude", []) + gexc)
        if not files:
            sys.exit(f"{repo}: no corpus files")
        datas, units_by_file, parse_errors = {}, {}, 0
        for rel in files:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
            datas[rel] = data
            if language == "python":
                try:
                    units = py_units(data, rel)
                except SyntaxError as e:
                    print(f"  {repo}/{rel}: not parsed ({e})", file=sys.stderr)
                    parse_errors += 1
                    units = []
            elif language == "go":
                units = go_units(data, rel)
            else:
                units = js_units(data, rel, lang_of(rel, language))
            units_by_file[rel] = units

        # documented functions/methods and their candidate queries
        documented = []
        for rel in files:
            for u in units_by_file[rel]:
                if u["kind"] in ("function", "method") and u.get("doc") and not is_test_name(u["name"]):
                    documented.append((rel, u, first_sentence(u["doc"], language)))
        norm = lambda s: re.sub(r"\s+", " ", s).strip().lower()
        sentence_count = Counter(norm(s) for _, _, s in documented)
        candidates, n_short, n_long, n_ambiguous = [], 0, 0, 0
        for rel, u, s in documented:
            if len(s.split()) < min_words:
                n_short += 1
            elif len(s) > max_chars:
                n_long += 1
            elif sentence_count[norm(s)] > 1:
                n_ambiguous += 1
            else:
                candidates.append((rel, u, s))
        candidates.sort(key=lambda c: (c[0], c[1]["start_line"], c[1]["qualname"]))
        rng = random.Random(f"{seed}:{repo}")
        chosen = candidates if len(candidates) <= max_q else rng.sample(candidates, max_q)
        chosen.sort(key=lambda c: (c[0], c[1]["start_line"], c[1]["qualname"]))

        # masked corpus (files whose bytes are unchanged are not rewritten, so an index over
        # sources/ stays valid between builds)
        dest = os.path.join(sources, repo)
        mask_by_file = defaultdict(list)
        for rel, u, _ in chosen:
            mask_by_file[rel].append(u)
        for rel in files:
            data = datas[rel]
            masked = data
            for u in mask_by_file.get(rel, []):
                masked = mask_py(masked, u["mask"]) if u["mask_mode"] == "py" else mask_comment(masked, u["mask"])
            assert len(masked) == len(data) and masked.count(b"\n") == data.count(b"\n"), rel
            if language == "python" and masked is not data:
                check = {(v["qualname"], v["start_line"]): v for v in py_units(masked, rel)}
                for u in mask_by_file[rel]:
                    v = check[(u["qualname"], u["start_line"])]
                    assert not (v.get("doc") or "").strip(), f"{rel}: {u['qualname']} still has a docstring"
            write_if_changed(os.path.join(dest, rel), masked)
        remove_stale(dest, set(files))
        paths[repo] = dest

        # items
        items = []
        for rel in files:
            n_lines = datas[rel].count(b"\n") + (0 if datas[rel].endswith(b"\n") or not datas[rel] else 1)
            items.append(dict(id=f"{repo}:{rel}", repo=repo, file=rel, kind="file", name=os.path.basename(rel),
                              qualname=rel, start_line=1, end_line=max(n_lines, 1), doc_start_line=1))
            for u in units_by_file[rel]:
                items.append(dict(id=f"{repo}:{rel}:{u['start_line']}-{u['end_line']}:{u['qualname']}", repo=repo,
                                  file=rel, kind=u["kind"], name=u["name"], qualname=u["qualname"],
                                  start_line=u["start_line"], end_line=u["end_line"],
                                  doc_start_line=u["doc_start_line"]))
        with open(os.path.join(work, "items", f"{repo}.jsonl"), "w") as f:
            for it in items:
                f.write(json.dumps(it) + "\n")
        items_by_repo[repo] = items

        # queries
        for rel, u, s in chosen:
            all_queries.append(dict(
                id=f"{repo}:{rel}:{u['qualname']}:{u['start_line']}", repo=repo, language=language,
                package=pkg["name"], version=pkg["version"], query=s,
                gold=[dict(file=rel, qualname=u["qualname"], kind=u["kind"], start_line=u["start_line"],
                           end_line=u["end_line"])],
                doc_lines=list(u["doc_lines"]), name_in_query=name_in(u["name"], s), split="main"))
        n_funcs = sum(1 for rel in files for u in units_by_file[rel] if u["kind"] in ("function", "method"))
        stats.append(dict(repo=repo, language=language, version=pkg["version"], files=len(files),
                          functions=n_funcs, documented=len(documented), short=n_short, long=n_long,
                          ambiguous=n_ambiguous, candidates=len(candidates), queries=len(chosen),
                          parse_errors=parse_errors))

    if not a.only:  # drop the outputs of packages no longer in packages.json
        keep = {p["repo"] for p in packages}
        for d in os.listdir(sources):
            if d not in keep:
                shutil.rmtree(os.path.join(sources, d))
        for f in os.listdir(os.path.join(work, "items")):
            if f.endswith(".jsonl") and f[:-len(".jsonl")] not in keep:
                os.remove(os.path.join(work, "items", f))
    with open(os.path.join(work, "queries.jsonl"), "w") as f:
        for q in all_queries:
            f.write(json.dumps(q) + "\n")
    with open(os.path.join(work, "paths.json"), "w") as f:
        json.dump(paths, f, indent=1)
    with open(os.path.join(work, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)

    hdr = (f"{'package':<14}{'language':<12}{'version':<34}{'files':>6}{'fns':>7}{'with doc':>9}"
           f"{'short':>7}{'long':>6}{'ambig':>7}{'cands':>7}{'queries':>9}")
    print(hdr)
    print("-" * len(hdr))
    for s in stats:
        print(f"{s['repo']:<14}{s['language']:<12}{s['version']:<34}{s['files']:>6}{s['functions']:>7}"
              f"{s['documented']:>9}{s['short']:>7}{s['long']:>6}{s['ambiguous']:>7}{s['candidates']:>7}"
              f"{s['queries']:>9}")
    tot = lambda k: sum(s[k] for s in stats)
    print(f"{'total':<14}{'':<12}{'':<34}{tot('files'):>6}{tot('functions'):>7}{tot('documented'):>9}"
          f"{tot('short'):>7}{tot('long'):>6}{tot('ambiguous'):>7}{tot('candidates'):>7}{tot('queries'):>9}")
    print(f"wrote {work}/queries.jsonl ({len(all_queries)} queries), items/, sources/, paths.json "
          f"in {time.time() - t0:.1f} s")
    if a.baseline:
        run_baseline(work, packages, all_queries, items_by_repo, a.score_py)
        print(f"total {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
