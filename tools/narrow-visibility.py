#!/usr/bin/env python3
"""Narrow the pcielab library's public face to what its dependants use.

Issue 35 asks for a small public face: an item is `pub` only when something outside the library
(the CLI, the integration tests, the benches, the fuzz targets' bodies, which
crates/pcielab/tests/suite/fuzz_regressions.rs includes) names it. Deciding that by hand over a
thousand items would be slow and would conflict with every branch that moves code, so this
tool decides it the way the compiler does and can be run again on any later tree:

1. narrow: every `pub` item and field under crates/pcielab/src becomes `pub(crate)`
   (`mod` for lib.rs's modules, so tests/layering.rs still reads them); `pub(crate)`,
   `pub(super)`, re-exports (`pub use`) and trait impls are left as they are.
2. restore: `cargo check --workspace --all-targets --keep-going --message-format=json` builds
   every dependant; each privacy error (E0603 private item or module, E0616 private field,
   E0624 private method or associated constant, E0451 private field in a literal or pattern)
   names an item, and exactly that item gets its `pub` back. The library's own warnings about
   a narrowed item are answered the same way: `private_interfaces` / `private_bounds` (a `pub`
   signature names it), `dead_code` and `unused_imports` (nothing used it: it stays `pub` and
   is listed at the end, for a person to delete or move under `cfg(test)`). Repeat until the
   workspace builds with none of those.
3. unreachable_pub: one more check of the library with `-W unreachable_pub`; every `pub` that
   rustc finds unreachable from outside becomes `pub(crate)`.

Only lines the tool narrowed in this run are ever restored, so a deliberate `pub(crate)` stays.

What it cannot see: an item a `pub use` re-exports is restored through E0364/E0365 whether or
not anything outside names it (narrow the item and its re-export together and build the
dependants to find those), and doc examples (`cargo test --doc`) are not among the dependants it
builds. An item only integration tests reach is kept public; moving such tests into the area's
unit tests (`src/<area>/tests/`) is what lets it go.
It edits the working tree in place: run it on a clean tree and read `git diff` afterwards.

    python3 tools/narrow-visibility.py            # narrow, restore, report
    python3 tools/narrow-visibility.py --dry-run  # count what step 1 would narrow; edit nothing

It prints each round's count of restored items, the items left `pub` that nothing outside uses,
and the public item count before and after (the `grep` of docs/architecture.md's habits).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "crates", "pcielab", "src")

ITEM_KEYWORDS = r"(?:(?:unsafe|async|const|extern(?:\s+\"C\")?)\s+)*(?:fn|struct|enum|trait|type|const|static|mod|use|union)\b"
# `pub` before an item keyword, or before a named field (`pub name: Type`), at the start of a line.
NARROWABLE = re.compile(r"^(\s*)pub (?=" + ITEM_KEYWORDS + r"|(?:r#)?[A-Za-z_][A-Za-z0-9_]*\s*:(?!:))")
# `pub` before a tuple-struct field on a one-line tuple struct: `struct CpuSet(pub BTreeSet<u32>);`
TUPLE_FIELD = re.compile(r"(?<=[(,] )pub (?=[A-Za-z&\[(])|(?<=\()pub (?=[A-Za-z&\[(])")
REEXPORT = re.compile(r"^\s*pub use ")
PUBLIC_ITEM_LINE = re.compile(r"^\s*pub (fn|struct|enum|mod|trait|type|const|static|use)")
PUBLIC_FIELD_LINE = re.compile(r"^\s*pub (?:r#)?[a-z_][a-z0-9_]*\s*:(?!:)")
PRIVACY_ERRORS = {"E0603", "E0616", "E0624", "E0451", "E0446", "E0364", "E0365"}
LIBRARY_WARNINGS = {"private_interfaces", "private_bounds", "dead_code", "unused_imports"}
CRATE = "pub(crate) "


def rust_files():
    for base, _dirs, files in os.walk(SRC):
        for name in sorted(files):
            if name.endswith(".rs"):
                yield os.path.join(base, name)


def count_public(paths=None):
    items = fields = 0
    for path in paths or rust_files():
        with open(path) as f:
            for line in f:
                items += bool(PUBLIC_ITEM_LINE.match(line))
                fields += bool(PUBLIC_FIELD_LINE.match(line))
    return items, fields


class Tree:
    """The library's files in memory, with the places this run narrowed."""

    def __init__(self):
        self.lines = {}
        for path in rust_files():
            with open(path) as f:
                self.lines[path] = f.read().split("\n")
        # path -> {line index: [column of each `pub(crate) ` this run wrote on that line]}
        self.narrowed = defaultdict(dict)
        self.restored = []  # (path, line index, why)

    def resume(self):
        """Takes every `pub` -> `pub(crate)` the working tree holds against git's HEAD as this
        run's own narrowing, so that an interrupted run goes on where it stopped."""
        for path, lines in self.lines.items():
            rel = os.path.relpath(path, ROOT)
            head = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True, text=True)
            if head.returncode != 0:
                continue
            head_lines = head.stdout.split("\n")
            if len(head_lines) != len(lines):
                continue
            for i, (old, new) in enumerate(zip(head_lines, lines)):
                if old == new:
                    continue
                cols, h, c = [], 0, 0
                while h < len(old) and c < len(new):
                    if old.startswith("pub ", h) and new.startswith(CRATE, c):
                        cols.append(c)
                        h, c = h + 4, c + len(CRATE)
                    elif old.startswith("pub mod ", h) and new.startswith("mod ", c):
                        cols.append(c)
                        h += 4
                    elif old[h] == new[c]:
                        h, c = h + 1, c + 1
                    else:
                        cols = []
                        break
                if cols and h == len(old) and c == len(new):
                    self.narrowed[path][i] = cols

    def narrow(self):
        for path, lines in self.lines.items():
            in_lib_rs = os.path.basename(path) == "lib.rs" and os.path.dirname(path) == SRC
            for i, line in enumerate(lines):
                # Re-exports keep `pub`: a narrowed item they name is restored through
                # E0364/E0365, while a narrowed grouped re-export (`pub(crate) use a::{B, C}`)
                # makes rustc name the import, not the item, and nothing gets restored.
                if line.lstrip().startswith("//") or REEXPORT.match(line):
                    continue
                m = NARROWABLE.match(line)
                if m and in_lib_rs and line[m.end():].startswith("mod "):
                    # A crate-root module: plain `mod` is `pub(crate)` there, and is what
                    # tests/layering.rs reads. Restoring writes `pub ` back in front of it.
                    lines[i] = m.group(1) + line[m.end():]
                    self.narrowed[path][i] = [len(m.group(1))]
                    continue
                if m:
                    line = m.group(1) + CRATE + line[m.end():]
                    self.narrowed[path].setdefault(i, []).append(len(m.group(1)))
                if re.match(r"^\s*(pub(\(crate\))? )?struct \w+(<[^>]*>)?\(", line):
                    cols = []
                    while True:
                        t = TUPLE_FIELD.search(line)
                        if not t:
                            break
                        cols.append(t.start())
                        line = line[: t.start()] + CRATE + line[t.end():]
                    if cols:
                        self.narrowed[path].setdefault(i, []).extend(cols)
                lines[i] = line
        return sum(len(c) for cols in self.narrowed.values() for c in cols.values())

    def write(self):
        for path, lines in self.lines.items():
            text = "\n".join(lines)
            with open(path) as f:
                if f.read() == text:
                    continue
            with open(path, "w") as f:
                f.write(text)

    def restore_at(self, path, line_no, column, why):
        """Give back `pub` to the narrowed item at or around 1-based line/column.

        The span may point into the item (a re-export's name, a method's name): the narrowed
        `pub(crate)` is the last one on that line at or before the column, else the nearest
        narrowed line above that is less indented (a multi-line `use`, an enum's variant)."""
        path = os.path.realpath(path)
        if path not in self.lines:
            return False
        i = line_no - 1
        lines = self.lines[path]
        narrowed = self.narrowed.get(path, {})
        if i not in narrowed:
            if re.match(r"\s*pub\b", lines[i]):
                return False  # already given back this round, or `pub(crate)` by design
            indent = len(lines[i]) - len(lines[i].lstrip())
            for j in range(i - 1, -1, -1):
                text = lines[j]
                if not text.strip():
                    continue
                j_indent = len(text) - len(text.lstrip())
                if j_indent < indent:
                    if j in narrowed:
                        i, column = j, len(text) + 1
                        break
                    indent = j_indent
                    if j_indent == 0:
                        return False
            else:
                return False
        cols = narrowed[i]
        before = [c for c in cols if c <= column - 1]
        col = max(before) if before else min(cols)
        line = lines[i]
        if line.startswith(CRATE, col):
            lines[i] = line[:col] + "pub " + line[col + len(CRATE):]
        elif os.path.basename(path) == "lib.rs" and line.startswith("mod ", col):
            lines[i] = line[:col] + "pub " + line[col:]
        else:
            return False
        cols.remove(col)
        shift = len("pub ") - len(CRATE) if not line.startswith("mod ", col) else len("pub ")
        narrowed[i] = [c + shift if c > col else c for c in cols]
        if not narrowed[i]:
            del narrowed[i]
        self.restored.append((path, i, why))
        return True

    def restore_named(self, name, path_words, why):
        """Restores the narrowed definitions or re-exports of `name`; where several modules
        define it, those in files named along the re-export's path."""
        item = re.compile(r"^\s*pub\(crate\) (?:" + ITEM_KEYWORDS + r")\s+" + re.escape(name) + r"\b"
                          + r"|^\s*pub\(crate\) use\b.*\b" + re.escape(name) + r"\b")
        found = [(path, i) for path, lines in self.lines.items() for i in self.narrowed.get(path, {})
                 if item.match(lines[i])]
        along = [(path, i) for path, i in found
                 if set(re.findall(r"\w+", os.path.relpath(path, SRC))) & path_words]
        done = False
        for path, i in along or found:
            done |= self.restore_at(path, i + 1, len(self.lines[path][i]) + 1, why)
        return done

    def restore_field(self, struct, field, why):
        """E0616 names a field and its struct but not where they are: restore `field` in every
        narrowed struct of that name (a name two modules share may get one `pub` too many)."""
        done = False
        head = re.compile(r"^\s*(pub(\(crate\))? )?struct " + re.escape(struct) + r"\b")
        field_re = re.compile(r"^(\s*)pub\(crate\) (?:r#)?" + re.escape(field) + r"\s*:")
        for path, lines in self.lines.items():
            for i, line in enumerate(lines):
                if not head.match(line):
                    continue
                indent = len(line) - len(line.lstrip())
                for j in range(i + 1, len(lines)):
                    text = lines[j]
                    if text.strip() and len(text) - len(text.lstrip()) <= indent:
                        break
                    if field_re.match(text) and j in self.narrowed.get(path, {}):
                        done |= self.restore_at(path, j + 1, len(text) + 1, why)
        return done


def cargo(args, cwd=ROOT):
    """Runs cargo with JSON messages; yields each compiler message with its target's name."""
    proc = subprocess.run(
        ["cargo"] + args + ["--message-format=json"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    messages = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-message":
            target = msg["target"]
            messages.append((target["name"], target["kind"], msg["message"]))
    return proc.returncode, messages, proc.stderr


def all_spans(diag):
    for span in diag["spans"]:
        yield span
    for child in diag["children"]:
        yield from all_spans(child)


def in_library(span):
    return os.path.realpath(os.path.join(ROOT, span["file_name"])).startswith(SRC + os.sep)


def answer(tree, messages, unused_too):
    """Restores what the messages ask for; returns how many items got `pub` back and the
    errors it could not answer (which would mean the narrowing broke something else).

    `dead_code` and `unused_imports` are answered only when `unused_too`: while the dependants
    still fail, the library has few `pub` roots and nearly everything in it looks unused."""
    restored = 0
    unanswered = []
    # The library builds twice under --all-targets (lib, lib test): an unused item is reported
    # by both when nothing uses it, by the plain lib only when unit tests use it.
    reports = defaultdict(int)
    for _target, _kinds, diag in messages:
        if diag["level"] == "warning" and (diag.get("code") or {}).get("code") == "dead_code":
            for span in diag["spans"]:
                if span["is_primary"]:
                    reports[(span["file_name"], span["line_start"], span["column_start"])] += 1
    seen = set()
    for target, _kinds, diag in messages:
        code = (diag.get("code") or {}).get("code")
        lib_spans = [s for s in all_spans(diag) if in_library(s)]
        if diag["level"] == "error" and code in PRIVACY_ERRORS:
            why = f"{code} in {target}: {diag['message']}"
            hit = False
            if code == "E0616" or (code == "E0451" and not lib_spans):
                # "field `x` of struct `pcielab::m::S` is private", "fields `a`, `b` of struct `S<T>` are private"
                m = re.search(r"fields? (.+?) of (?:struct|union) `([^`]+)`", diag["message"])
                if m:
                    struct = m.group(2).split("<")[0].split("::")[-1]
                    for field in re.findall(r"`([^`]+)`", m.group(1)):
                        hit |= tree.restore_field(struct, field, why)
            if code in ("E0364", "E0365"):
                # "`Error` is only public within the crate, and cannot be re-exported outside":
                # the span is the re-export; the item is found by name along its path.
                m = re.search(r"`([A-Za-z0-9_]+)`", diag["message"])
                if m:
                    path_words = set(re.findall(r"\w+", "".join(t["text"] for s in diag["spans"] for t in s["text"])))
                    hit |= tree.restore_named(m.group(1), path_words, why)
            for span in lib_spans:
                # A privacy error's spans in the library point only at what must be reachable:
                # the item, the re-export naming it, the private field of a tuple constructor.
                hit |= tree.restore_at(os.path.join(ROOT, span["file_name"]), span["line_start"], span["column_start"], why)
            if not hit and code == "E0603":
                # The note points at a glob re-export (`pub use finding::*`), which stays `pub`:
                # the item is the one of that name in the globbed module.
                m = re.search(r"`([A-Za-z0-9_]+)` is private", diag["message"])
                if m:
                    texts = "".join(t["text"] for sp in lib_spans for t in sp["text"])
                    hit |= tree.restore_named(m.group(1), set(re.findall(r"\w+", texts)), why)
            restored += hit
            if not hit:
                unanswered.append(f"{target}: {diag['rendered']}")
        elif diag["level"] == "warning" and lib_spans and (
            code in ("private_interfaces", "private_bounds")
            or (unused_too and code in ("dead_code", "unused_imports"))
        ):
            if code in ("private_interfaces", "private_bounds"):
                spans = [s for c in diag["children"] for s in c["spans"] if in_library(s)]
                why = f"{code}: {diag['message']}"
            else:
                spans = [s for s in diag["spans"] if s["is_primary"] and in_library(s)]
            for span in spans:
                key = (span["file_name"], span["line_start"], span["column_start"])
                if key in seen:
                    continue
                seen.add(key)
                if code == "dead_code":
                    who = "nothing uses it" if reports[key] > 1 else "only unit tests use it"
                    why = f"dead_code ({who}): {diag['message']}"
                elif code == "unused_imports":
                    why = f"unused_imports (nothing uses it): {diag['message']}"
                if tree.restore_at(os.path.join(ROOT, span["file_name"]), span["line_start"], span["column_start"], why):
                    restored += 1
        elif diag["level"] == "error":
            unanswered.append(f"{target}: {diag['rendered']}")
    return restored, unanswered


def narrow_unreachable(tree):
    """Step 3: `pub` items rustc finds unreachable from outside the crate become `pub(crate)`."""
    _rc, messages, _err = cargo(["rustc", "-p", "pcielab", "--lib", "--profile", "check", "--", "-W", "unreachable_pub"])
    narrowed = 0
    seen = set()
    for _target, _kinds, diag in messages:
        if (diag.get("code") or {}).get("code") != "unreachable_pub":
            continue
        for child in diag["children"]:
            for span in child["spans"]:
                if span.get("suggested_replacement") != "pub(crate)" or not in_library(span):
                    continue
                path = os.path.realpath(os.path.join(ROOT, span["file_name"]))
                key = (path, span["line_start"], span["column_start"])
                if key in seen:
                    continue
                seen.add(key)
                lines = tree.lines[path]
                i, col = span["line_start"] - 1, span["column_start"] - 1
                if lines[i].startswith("pub ", col):
                    lines[i] = lines[i][:col] + CRATE + lines[i][col + 4:]
                    narrowed += 1
    return narrowed


DEPENDANTS = ["check", "--workspace", "--lib", "--bins", "--test", "*", "--bench", "*", "--keep-going"]
EVERY_TARGET = ["check", "--workspace", "--all-targets", "--keep-going"]


def converge(tree, command, unused_too, rounds, started):
    """Builds with `command` and answers its messages until a round restores nothing."""
    for round_no in range(1, rounds + 1):
        rc, messages, stderr = cargo(command[1:] if command[0] == "cargo" else command)
        restored, unanswered = answer(tree, messages, unused_too)
        tree.write()
        step = "2b" if unused_too else "2a"
        print(f"step {step} round {round_no}: cargo check exit {rc}, {restored} items get `pub` back "
              f"({time.monotonic() - started:.0f} s)", flush=True)
        if restored:
            continue
        if rc != 0:
            print("the workspace does not build and no error names a narrowed item:", file=sys.stderr)
            for text in unanswered[:20]:
                print(text, file=sys.stderr)
            if not unanswered:
                print(stderr[-4000:], file=sys.stderr)
            return False
        return True
    print(f"still restoring after {rounds} rounds; run again with --resume", file=sys.stderr)
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="count what step 1 would narrow; edit nothing")
    parser.add_argument("--max-rounds", type=int, default=12)
    parser.add_argument("--resume", action="store_true",
                        help="an earlier run stopped: take its uncommitted narrowing as this run's and go on")
    args = parser.parse_args()

    started = time.monotonic()
    before = count_public()
    tree = Tree()
    if args.resume:
        # Go on from the interrupted run's tree: what it gave back stays given back.
        tree.resume()
        narrowed = sum(len(c) for cols in tree.narrowed.values() for c in cols.values())
    else:
        narrowed = tree.narrow()
    print(f"public items {before[0]}, pub fields {before[1]}; step 1 narrows {narrowed} places", flush=True)
    if args.dry_run:
        return 0

    tree.write()
    # Step 2a: the dependants' privacy errors, until they build. The lib's own test build is
    # left out here (it is inside the crate: privacy never stops it).
    if not converge(tree, DEPENDANTS, unused_too=False, rounds=args.max_rounds, started=started):
        return 1
    # Step 2b: with the real roots `pub` again, what the library alone uses nothing of.
    if not converge(tree, EVERY_TARGET, unused_too=True, rounds=args.max_rounds, started=started):
        return 1

    unreachable = narrow_unreachable(tree)
    tree.write()
    print(f"unreachable_pub: {unreachable} more narrowed", flush=True)
    if unreachable:
        rc, messages, _ = cargo(EVERY_TARGET)
        restored, unanswered = answer(tree, messages, unused_too=True)
        tree.write()
        if rc != 0 or restored:
            print("narrowing what unreachable_pub named broke the build; run the tool again", file=sys.stderr)
            return 1

    unused = sorted((p, i, why) for p, i, why in tree.restored if why.startswith(("dead_code", "unused_imports")))
    if unused:
        print(f"\n{len(unused)} items stay `pub` only because nothing uses them (delete them, or put "
              f"the ones only unit tests use under cfg(test)):")
        for path, i, why in unused:
            print(f"  {os.path.relpath(path, ROOT)}:{i + 1}: {why}")
    after = count_public()
    print(f"\npublic items {before[0]} -> {after[0]}, pub fields {before[1]} -> {after[1]} "
          f"in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
