#!/usr/bin/env python3
"""Build the Debian-patch set: commit message -> changed functions, in Python.

usage: python build.py [--work DIR] [--packages packages.json] [--only a,b] [--baseline]

The queries are the messages of the patches Debian applies to Python packages (mostly fixes
taken from upstream: their subject and first paragraph); the gold is the functions each patch
changes, located in the package's code as upstream released it (every Debian patch reversed).
For every package of packages.json:
  1. downloads its `.debian.tar.xz` and its `python3-*` binary packages from Debian's mirror
     into WORK/downloads/ (checked against the pinned sha256);
  2. takes the binaries' `.py` files (re-rooted below `dist-packages/`; tests excluded) as the
     patched tree, then reverses the patches of `debian/patches/series`, last first, each on
     the files of the tree it names, which gives every patch's before and after;
  3. classifies each changed line of a patch on its side of the diff (Python `ast`): inside a
     function or method, or beside them (blank, comment, import, docstring, module- or
     class-level assignment); any other code line, or a source file outside the tree, rejects
     the patch, and so does a subject that reads as packaging; a function the patch adds is
     not gold (the released code has none);
  4. keeps patches touching 1 to 3 functions of the released tree, takes their message as the
     query, splits `easy` (the query writes a gold function's name) from `main`, samples at
     most `per_repo_cap` per package (fixed seed);
  5. writes WORK/sources/<repo>/ (the released tree), WORK/paths.json, WORK/queries.jsonl and
     WORK/items/<repo>.jsonl in ../shared/eval's format, and prints what each filter dropped.
With --baseline it also writes WORK/runs/grep_bm25.jsonl (the polyglot set's plain BM25 over
every function, method and class) and scores it per split.

Needs Python >= 3.11 (standard library) and the `patch` program.
"""
import ast
import difflib
import email.header
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("polyglot_build",
                                               os.path.join(HERE, "..", "polyglot", "build.py"))
pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pg)

DEFAULT_WORK = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                            "ploke-eval", "patches")
EXCLUDE = [pg.glob_re(p) for p in ("**/test/**", "**/tests/**", "**/testing/**", "**/unittests/**",
                                   "**/test_*.py", "**/*_test.py", "**/conftest.py",
                                   "**/examples/**", "**/example/**")]
SOURCE_EXT = (".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".rs",
              ".go", ".js", ".ts", ".java")
# Folders whose files are never the tree's, whatever their path below ends with.
CODE_FREE_DIRS = r"tests?|testing|unittests|docs?|examples?"
NOT_CODE_DIR = re.compile(rf"(?:^|/)(?:{CODE_FREE_DIRS})/", re.I)
# Paths a patch may change beside the tree without its gold being incomplete.
NOT_SOURCE = re.compile(rf"(?:^|/)(?:{CODE_FREE_DIRS}|debian|tools|scripts|benchmarks?|"
                        r"releasenotes)/|(?:^|/)(?:setup|conf|conftest|noxfile|tasks)\.py\Z|"
                        r"(?:^|/)test_[^/]*\Z|_test\.py\Z", re.I)
# Subjects that read as packaging or housekeeping, not as a change to what the code does
# (../shared/eval's subject filters, plus Debian's own reasons to patch).
SUBJECT_DROP = re.compile(
    r"\b(?:merge|revert|release|bump|version|typos?|spelling|grammar|docs?|documentation|"
    r"readme|changelog|ci|lint|flake8|pep8|deps|dependency|dependencies|upgrade|debian|"
    r"lintian|packaging|privacy|sphinx|network|internet|offline|download|install(?:ation)?|"
    r"build(?:ing)?|setup\.py|vendor(?:ed)?|embedded|bundled|unbundle|system|fhs|hardcod\w*|"
    r"shebang|warnings?)\b", re.I)
TRAILER = re.compile(r"^(?:[A-Z][A-Za-z-]*-by|Change-Id|Bug(?:-[A-Za-z]+)*|Origin|Forwarded|"
                     r"Last-Update[d]?|Applied-Upstream|Reviewed-on|Closes-Bug|Partial-Bug|"
                     r"Related-Bug|Conflicts|Author|From|Date|Index|Upstream-Status|Story|Task|"
                     r"Depends-On|Needed-By|CVE|Fixes|Closes|Resolves|Patch-Name|MIME-Version|"
                     r"Content-Type|Content-Transfer-Encoding|PiperOrigin-RevId|Reference|"
                     r"Refs)\s*:", re.I)
URL = re.compile(r"<?https?://\S+>?")
REFS = re.compile(r"\((?:#|gh-|GH-)\d+\)|\b[\w.-]+/[\w.-]+#\d+\b|\b(?:fixes|closes|resolves|see)\s+"
                  r"(?:#|gh-|bug\s*)\d+\b|\(cherry picked from commit [0-9a-f]+\)|"
                  r"\bBackport of [0-9a-f]{7,40}\b[^.]*\.?|\(?LP:?\s*#\d+\)?|"
                  r"\b(?:fix(?:es)?|see)\b:?\s*#\d+|\brefs?\b:?\s*(?:#\d+|CVE-\d+-\d+)(?:,?\s*"
                  r"(?:#\d+|CVE-\d+-\d+))*|\bDescription:\s*|\b[0-9a-f]{40}\b", re.I)
PATCH_MARK = re.compile(r"\[PATCH[^\]]*\]\s*", re.I)
MAX_QUERY_CHARS = 600


# --------------------------------------------------------------------------------------------
# fetching and unpacking


def fetch(entry, downloads):
    """The verified download of one pinned file (`filename`, `pool_path`, `sha256`)."""
    os.makedirs(downloads, exist_ok=True)
    dest = os.path.join(downloads, entry["filename"])
    if not os.path.exists(dest):
        url = pg.DEBIAN_MIRROR + entry["pool_path"]
        print(f"fetching {url}", file=sys.stderr)
        pg.http_get(url, dest)
    got = pg.sha256_file(dest)
    if got != entry["sha256"]:
        sys.exit(f"{dest}: sha256 {got} != pinned {entry['sha256']} (delete it to fetch again)")
    return dest


def corpus_rel(path):
    """A binary package's file as the tree names it: below `dist-packages/` or `site-packages/`
    when it is there, else its path in the package."""
    for marker in ("/dist-packages/", "/site-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def patched_tree(pkg, work):
    """{relative path: bytes} of the non-test `.py` files of the package's python3 binaries."""
    root = os.path.join(work, "pristine", pkg["repo"])
    stamp = os.path.join(root, ".pristine")
    want = "\n".join(b["sha256"] for b in pkg["binaries"])
    if not (os.path.exists(stamp) and open(stamp).read() == want):
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        for b in pkg["binaries"]:
            pg.unpack_deb(fetch(b, os.path.join(work, "downloads")), root)
        with open(stamp, "w") as f:
            f.write(want)
    tree = {}
    for d, dirs, names in os.walk(root):
        dirs.sort()
        for n in sorted(names):
            full = os.path.join(d, n)
            if not n.endswith(".py") or os.path.islink(full):
                continue
            rel = corpus_rel(os.path.relpath(full, root).replace(os.sep, "/"))
            if any(r.match(rel) for r in EXCLUDE) or rel in tree:
                continue
            with open(full, "rb") as f:
                tree[rel] = f.read()
    return tree


def debian_patches(pkg, work):
    """[(name, text, strip level)] in the order of debian/patches/series."""
    archive = fetch(pkg["debian"], os.path.join(work, "downloads"))
    out = []
    with tarfile.open(archive, "r:*") as t:
        members = {m.name: m for m in t.getmembers() if m.isfile()}
        series = members.get("debian/patches/series")
        if series is None:
            return out
        for line in t.extractfile(series).read().decode("utf-8", "replace").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            strip = 1
            for opt in parts[1:]:
                if opt.startswith("-p") and opt[2:].isdigit():
                    strip = int(opt[2:])
            m = members.get("debian/patches/" + parts[0])
            if m is not None:
                out.append((parts[0], t.extractfile(m).read().decode("utf-8", "replace"), strip))
    return out


# --------------------------------------------------------------------------------------------
# patches


def split_patch(text, strip):
    """(message header, [(path, section text, whether it creates the file)]) of a unified
    diff; path with `strip` components removed (the new side's, or the old side's for a
    deletion)."""
    lines = text.splitlines(keepends=True)
    header, sections, cur = [], [], None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = lines[i][4:].split("\t")[0].strip()
            new = lines[i + 1][4:].split("\t")[0].strip()
            path = new if new != "/dev/null" else old
            path = "/".join(path.split("/")[strip:])
            cur = [path, [line, lines[i + 1]], old == "/dev/null"]
            sections.append(cur)
            i += 2
            continue
        if cur is None:
            header.append(line)
        elif line.startswith(("@@", "+", "-", " ", "\\")) or line in ("\n", "\r\n"):
            cur[1].append(line)
        elif not line.startswith(("diff ", "Index:", "===", "index ")):
            cur = None  # text after the section: the next patch's header, a mail signature
        i += 1
    return "".join(header), [(p, "".join(body), created) for p, body, created in sections]


def tree_path(path, tree_paths):
    """The tree's file a patch path names: the longest tree path it ends with, at a folder
    boundary (`src/urllib3/poolmanager.py` -> `urllib3/poolmanager.py`)."""
    parts = path.split("/")
    for k in range(len(parts)):
        cand = "/".join(parts[k:])
        if cand in tree_paths:
            # `tests/pkg/x.py` is a test's file, not the tree's `pkg/x.py`.
            if NOT_CODE_DIR.search("/".join(parts[:k]) + "/"):
                return None
            return cand
    return None


def reverse(text, section):
    """`text` with one file's diff reversed, or None when it does not reverse cleanly
    (offsets allowed, no fuzz)."""
    with tempfile.TemporaryDirectory() as d:
        target = os.path.join(d, "f")
        with open(target, "wb") as f:
            f.write(text)
        body = section.split("\n", 2)[2] if section.count("\n") >= 2 else ""
        diff = "--- f\n+++ f\n" + body
        r = subprocess.run(["patch", "-R", "-s", "-f", "-F0", "--no-backup-if-mismatch",
                            "-r", os.path.join(d, "rejects"), target],
                           input=diff.encode(), capture_output=True, cwd=d)
        if r.returncode != 0:
            return None
        if not os.path.exists(target):  # the patch created the file
            return b""
        with open(target, "rb") as f:
            return f.read()


# --------------------------------------------------------------------------------------------
# messages


def message(header):
    """(subject, body paragraphs) of a patch's header: DEP-3 (`Description:`/`Subject:`, its
    continuation lines the body) or `git format-patch` (`Subject:`, folded, then the body up
    to `---`); trailers (`Origin:`, `Signed-off-by:`, ...) dropped."""
    lines = header.splitlines()
    if lines and lines[0].startswith("# HG changeset patch"):
        # `hg export`: `#` header lines, then the message.
        text = [line for line in lines if not line.startswith("#")]
        while text and not text[0].strip():
            text.pop(0)
        if not text:
            return "", []
        lines = ["Subject: " + text[0], ""] + text[1:]
    mail = header_is_email(lines)
    subject, body, field, in_trailer = "", [], None, False
    for line in lines:
        if line.startswith(("---", "diff ", "Index:", "===", "index ")):
            break
        m = re.match(r"^(Description|Subject):\s*(.*)$", line, re.I)
        if m and not subject:
            field, subject = m.group(1).lower(), m.group(2).strip()
            continue
        if field and line[:1] in (" ", "\t") and line.strip():
            text = line.strip()
            if mail and field == "subject" and not body:
                subject += " " + text  # an RFC 2822 folded subject
            else:
                body.append("" if text == "." else text)
            continue
        field = None
        if in_trailer and line[:1] in (" ", "\t") and line.strip():
            continue  # a trailer's continuation line
        in_trailer = bool(TRAILER.match(line))
        if subject and not in_trailer:
            body.append(line.strip())
    return decoded(PATCH_MARK.sub("", subject)).strip(), paragraphs(body)


def decoded(subject):
    """A subject with its RFC 2047 words decoded (`=?UTF-8?q?Don=E2=80=99t?=`) and anything
    from a MIME header folded into it cut off."""
    subject = re.split(r"\s*MIME-Version:", subject, maxsplit=1)[0]
    if "=?" in subject:
        try:
            subject = str(email.header.make_header(email.header.decode_header(subject)))
        except (ValueError, LookupError, UnicodeDecodeError):
            pass
    return subject


def header_is_email(lines):
    """Whether the header is a mail (`git format-patch`, `gbp pq`): its Subject is folded."""
    return any(line.startswith("From: ") for line in lines) and any(
        line.startswith("Date: ") for line in lines)


def paragraphs(lines):
    out, cur = [], []
    for line in lines:
        if not line.strip():
            if cur:
                out.append(" ".join(cur))
                cur = []
        elif not TRAILER.match(line):
            cur.append(line.strip())
    if cur:
        out.append(" ".join(cur))
    return out


def clean(text):
    text = URL.sub("", text)
    text = REFS.sub("", text)
    return re.sub(r"\s+", " ", text).strip(" .:;-")


def query_of(subject, body):
    """Subject plus the first prose paragraph, as ../shared/eval builds its queries."""
    parts = [clean(subject)]
    for para in body:
        para = clean(para)
        # A paragraph left with a word or two is a label or references ("Reference:", "See").
        if len(para.split()) < 3 or para.startswith(("#", "<!--", "* ", "- ")) or \
                para.lower() == parts[0].lower():
            continue
        parts.append(para)
        break
    text = ". ".join(p for p in parts if p)
    if len(text) > MAX_QUERY_CHARS:
        text = text[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    return text


# --------------------------------------------------------------------------------------------
# localization


def functions(data, path):
    """[(qualname, occurrence, start, end, decorator start)] of the functions and methods of a
    Python file (nested functions belong to their outer function), or None if it does not parse."""
    try:
        units = pg.py_units(data, path)
    except (SyntaxError, ValueError):
        return None
    seen = Counter()
    out = []
    for u in units:
        if u["kind"] in ("function", "method"):
            seen[u["qualname"]] += 1
            out.append((u["qualname"], seen[u["qualname"]], u["start_line"], u["end_line"],
                        u["doc_start_line"]))
    return out


def owner(fns, line):
    """The function holding 1-based `line` (its decorators included), or None."""
    best = None
    for f in fns:
        if f[4] <= line <= f[3] and (best is None or f[2] >= best[2]):
            best = f
    return best


def supporting_lines(data):
    """1-based lines of statements beside the functions that a change may touch without
    making its gold incomplete: imports, docstrings, and assignments at module or class level
    (constants, option lists, `__all__`). Empty if the file does not parse."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return set()
    out = set()

    def visit(body):
        for node in body:
            doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str)
            if doc or isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign,
                                        ast.AugAssign)):
                out.update(range(node.lineno, node.end_lineno + 1))
            elif isinstance(node, ast.ClassDef):
                visit(node.body)

    visit(tree.body)
    return out


def ignorable(line):
    s = line.strip()
    return (not s or s.startswith("#") or re.match(r"(?:from\s+\S+\s+)?import\s", s) is not None)


def touched(old, new, path):
    """The functions (qualname, occurrence) a change from `old` to `new` touches, judged on the
    old side for removed lines and on the new side for added ones; or a reason to reject (a
    changed code line neither in a function nor a supporting statement; a function written
    more or fewer times). A function the change adds is not gold (the released code has no such
    function), one it removes is."""
    fo, fn = functions(old, path), functions(new, path)
    if fo is None or fn is None:
        return "unparsable"
    a = old.decode("utf-8", "replace").splitlines()
    b = new.decode("utf-8", "replace").splitlines()
    before_fns = {(q, k) for q, k, *_ in fo}
    beside = {"old": supporting_lines(old), "new": supporting_lines(new)}
    hit = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for side, lines, lo, hi, fns in (("old", a, i1, i2, fo), ("new", b, j1, j2, fn)):
            for idx in range(lo, hi):
                if ignorable(lines[idx]):
                    continue
                f = owner(fns, idx + 1)
                if f is None and idx + 1 in beside[side]:
                    continue
                if f is None:
                    return "outside_fn"
                key = (f[0], f[1])
                if key in before_fns:
                    hit.add(key)
    # Copies of one name are told apart by their order: only where both sides have as many.
    count = {side: Counter(q for q, *_ in fns) for side, fns in (("old", fo), ("new", fn))}
    if any(count["old"][q] != count["new"][q] for q, _k in hit if count["new"][q]):
        return "fn_copies_changed"
    return hit


# --------------------------------------------------------------------------------------------


def build_repo(pkg, work, stats):
    """The queries of one package and its released tree ({path: bytes})."""
    tree = patched_tree(pkg, work)
    patches = debian_patches(pkg, work)
    paths = set(tree)
    # Reverse every patch, last first; changes[i] holds, for each file patch i changes, its
    # (before, after). A file's state is None before the patch that creates it.
    state = dict(tree)
    broken = set()  # files some later patch failed to reverse on: their earlier states are unknown
    changes = [None] * len(patches)
    for i in range(len(patches) - 1, -1, -1):
        name, text, strip = patches[i]
        header, sections = split_patch(text, strip)
        by_file, outside = {}, []
        for path, section, created in sections:
            rel = tree_path(path, paths)
            if rel is None:
                if path.endswith(SOURCE_EXT) and not NOT_SOURCE.search(path):
                    outside.append(path)
                continue
            by_file.setdefault(rel, []).append((section, created))
        files = {}
        for rel, parts in by_file.items():
            after = before = state[rel]
            for section, created in reversed(parts):
                if rel in broken or before is None:
                    before = None
                    break
                before = reverse(before, section)
                if before is None:
                    break
                if created:
                    before = b""
            if before is None or after is None:
                broken.add(rel)
                files[rel] = None
                continue
            files[rel] = (before, after)
            state[rel] = None if any(created for _, created in parts) else before
        n_source = len({path for path, _, _ in sections if path.endswith(SOURCE_EXT)})
        changes[i] = (name, header, files, outside, n_source)
    released = {rel: data for rel, data in state.items() if data is not None}
    fns_released = {}
    queries = []
    for name, header, files, outside, n_source in changes:
        stats["patches"] += 1
        subject, body = message(header)
        reason = None
        if not files:
            reason = "no_tree_file"
        elif any(v is None for v in files.values()):
            reason = "does_not_reverse"
        elif outside:
            reason = "src_outside_tree"
        elif n_source > 6:
            reason = "too_many_files"
        elif not subject:
            reason = "no_message"
        elif SUBJECT_DROP.search(subject):
            reason = "subject_filter"
        gold = []
        if reason is None:
            for rel, (before, after) in sorted(files.items()):
                got = touched(before, after, rel)
                if isinstance(got, str):
                    reason = got
                    break
                for qualname, k in sorted(got):
                    if rel not in fns_released:
                        fns_released[rel] = functions(released.get(rel, b""), rel) or []
                    same = [f for f in fns_released[rel] if f[0] == qualname]
                    copies = sum(1 for f in functions(before, rel) or [] if f[0] == qualname)
                    if not same:
                        reason = "gold_not_released"
                        break
                    if len(same) != copies:
                        reason = "gold_ambiguous"
                        break
                    f = same[k - 1]
                    gold.append(dict(file=rel, qualname=qualname,
                                     kind="method" if "." in qualname else "function",
                                     start_line=f[2], end_line=f[3]))
                if reason:
                    break
        if reason is None and not 1 <= len(gold) <= 3:
            reason = "no_fn_touched" if not gold else "too_many_fns"
        query = query_of(subject, body) if reason is None else ""
        if reason is None and len(query.split()) < 5:
            reason = "short_query"
        if reason is not None:
            stats[reason] += 1
            continue
        easy = any(pg.name_in(g["qualname"].rsplit(".", 1)[-1], query) for g in gold)
        queries.append(dict(id=f"{pkg['repo']}:{name}", repo=pkg["repo"], language="python",
                            package=pkg["repo"], version=pkg["version"], patch=name, query=query,
                            gold=gold, split="easy" if easy else "main"))
    # Identical messages (a fix and its backport) count once: the last in the series.
    seen, unique = set(), []
    for q in reversed(queries):
        if q["query"].lower() in seen:
            stats["duplicate_query"] += 1
            continue
        seen.add(q["query"].lower())
        unique.append(q)
    return unique[::-1], released


def main():
    a, work, spec, packages = pg.command_line(__doc__, DEFAULT_WORK, os.path.join(HERE, "packages.json"))
    t0 = time.time()
    cap = spec["per_repo_cap"]
    stats = Counter()
    all_queries, items_by_repo, paths, kept_packages, per_repo = [], {}, {}, [], []
    for pkg in packages:
        queries, released = build_repo(pkg, work, stats)
        found = len(queries)
        if len(queries) > cap:
            stats["over_cap"] += len(queries) - cap
            picked = set(random.Random(f"{spec['seed']}:{pkg['repo']}").sample(range(len(queries)), cap))
            queries = [q for i, q in enumerate(queries) if i in picked]
        per_repo.append((pkg["repo"], len(released), found, len(queries)))
        if not queries:
            continue
        src = os.path.join(work, "sources", pkg["repo"])
        for rel, data in released.items():
            pg.write_if_changed(os.path.join(src, rel), data)
        pg.remove_stale(src, set(released))
        items = []
        for rel in sorted(released):
            data = released[rel]
            items.append(dict(id=f"{pkg['repo']}:{rel}", repo=pkg["repo"], file=rel, kind="file",
                              name=rel, qualname=rel, start_line=1,
                              end_line=max(1, data.count(b"\n")), doc_start_line=1))
            try:
                units = pg.py_units(data, rel)
            except (SyntaxError, ValueError):
                continue
            for u in units:
                items.append(dict(id=f"{pkg['repo']}:{rel}:{u['start_line']}-{u['end_line']}:{u['qualname']}",
                                  repo=pkg["repo"], file=rel, kind=u["kind"], name=u["name"],
                                  qualname=u["qualname"], start_line=u["start_line"],
                                  end_line=u["end_line"], doc_start_line=u["doc_start_line"]))
        items_by_repo[pkg["repo"]] = items
        paths[pkg["repo"]] = src
        kept_packages.append(pkg)
        all_queries.extend(queries)
    os.makedirs(os.path.join(work, "items"), exist_ok=True)
    # What an earlier build wrote for a package that gives no query now goes.
    for name in os.listdir(os.path.join(work, "items")):
        if name.endswith(".jsonl") and name[:-len(".jsonl")] not in items_by_repo:
            os.remove(os.path.join(work, "items", name))
    for name in os.listdir(os.path.join(work, "sources")) if os.path.isdir(os.path.join(work, "sources")) else []:
        if name not in paths:
            shutil.rmtree(os.path.join(work, "sources", name))
    for repo, items in items_by_repo.items():
        with open(os.path.join(work, "items", f"{repo}.jsonl"), "w") as f:
            for it in items:
                f.write(json.dumps(it) + "\n")
    with open(os.path.join(work, "paths.json"), "w") as f:
        json.dump(paths, f, indent=1, sort_keys=True)
    with open(os.path.join(work, "queries.jsonl"), "w") as f:
        for q in all_queries:
            f.write(json.dumps(q) + "\n")
    splits = Counter(q["split"] for q in all_queries)
    print(f"{'repo':<28}{'py files':>9}{'found':>7}{'queries':>9}")
    for repo, files, found, n in per_repo:
        print(f"{repo:<28}{files:>9}{found:>7}{n:>9}")
    print(f"\npackages {len(packages)}, with queries {len(kept_packages)}; queries {len(all_queries)} "
          f"(main {splits['main']}, easy {splits['easy']}); {time.time() - t0:.1f} s")
    print("patches:", dict(sorted(stats.items())))
    with open(os.path.join(work, "stats.json"), "w") as f:
        json.dump(dict(stats=stats, per_repo=per_repo, splits=splits), f, indent=1)
    if a.baseline:
        pg.run_baseline(work, kept_packages, all_queries, items_by_repo, a.score_py)
        run = os.path.join(work, "runs", "grep_bm25.jsonl")
        for split in ("main", "easy"):
            subprocess.run([sys.executable, a.score_py, run, "--split", split, "--queries",
                            os.path.join(work, "queries.jsonl")], check=True)


if __name__ == "__main__":
    main()
