#!/usr/bin/env python3
"""Checks the size limits of production code (issue 27): no source file over 900 lines and no
function over 80 lines in search/, load_model/, placement/, trainer/, trainer_adapter/, service/
and serve/.

A function is a definition whose signature line ends in "{" (at any indentation, so members
defined in a class count too) and whose body is found by matching braces, comments and string
literals skipped; its length runs from the signature's first line to the closing brace.

usage: sizes.py SOURCE_ROOT [--report]   exit 0 when both limits hold; else prints each breach
       (--report: prints the largest files and functions and exits 0).
"""
import os
import re
import sys

CODE_DIRS = ["search", "load_model", "placement", "trainer", "trainer_adapter", "service", "serve"]
# Breaches not yet mended: reported, not failed. Empty since issue 27's slices landed; a file
# may be listed here only while its mend is under way, never to let new code through.
KNOWN = set()
MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 80
NOT_FUNCTIONS = re.compile(
    r"^\s*(?:template\s*<.*>\s*)?(?:class|struct|union|enum|namespace|extern|if|else|for|while|"
    r"switch|do|try|catch|return)\b|=\s*\{$|^\s*[{}]|\bstatic_assert\b")


def strip(text):
    """The text with comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name line, first line number, length) of each function defined in the file."""
    with open(path, encoding="utf-8") as f:
        lines = strip(f.read()).split("\n")
    found = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.endswith("{") and not NOT_FUNCTIONS.search(line):
            # The signature: back to the line that opened it (a ')' here, its '(' earlier).
            start = i
            text = line
            while start > 0 and text.count("(") < text.count(")"):
                start -= 1
                text = lines[start] + text
            if "(" in text and not re.search(r"\b(?:if|for|while|switch|catch)\s*\(", text) \
                    and not re.search(r"\]\s*\(|\[[^\]]*\]\s*(?:\(|\{)", text):
                depth, j = 0, i
                while j < len(lines):
                    depth += lines[j].count("{") - lines[j].count("}")
                    if depth <= 0:
                        break
                    j += 1
                found.append((text.strip()[:90], start + 1, j - start + 1))
                i = j + 1
                continue
        i += 1
    return found


def main(root, report):
    problems, files, funcs = [], [], []
    for top in CODE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".cc", ".cu", ".h", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as f:
                    count = f.read().count("\n")
                files.append((count, rel))
                if count > MAX_FILE_LINES:
                    problems.append(f"{rel}: {count} lines (at most {MAX_FILE_LINES})")
                for sig, line, length in functions(path):
                    funcs.append((length, f"{rel}:{line}", sig))
                    if length > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{line}: a function of {length} lines (at most "
                                        f"{MAX_FUNCTION_LINES}): {sig}")
    if report:
        for count, rel in sorted(files, reverse=True)[:10]:
            print(f"{count:5d} lines  {rel}")
        for length, where, sig in sorted(funcs, reverse=True)[:15]:
            print(f"{length:5d} lines  {where}  {sig}")
        return 0
    failing = [p for p in problems if p.split(":")[0] not in KNOWN]
    for p in problems:
        print(("known: " if p not in failing else "") + p)
    print(f"{len(files)} files, {len(funcs)} functions, {len(problems)} over the limits "
          f"({len(problems) - len(failing)} known)")
    return 1 if failing else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], "--report" in sys.argv[2:]))
