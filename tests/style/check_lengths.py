#!/usr/bin/python3
"""The code's size rules, checked over the tree:
  * no file in coordinator/, runtime/ or store/ over MAX_FILE_LINES lines;
  * no function over MAX_FUNC_LINES lines (signature to closing brace) in
    any .c or .cu file outside tests/.
A function is found as C code written here is: its signature starts at
column 0 and its closing brace stands alone at column 0. Braces inside
strings, character literals and comments are skipped. Prints every
violation; exit 1 if any.   Usage: check_lengths.py SOURCE_DIR"""
import os
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNC_LINES = 100
FILE_DIRS = ("coordinator", "runtime", "store")
SKIP_DIRS = {"tests", "build", ".git", "node_modules"}


def code_only(text):
    """text with comments, strings and char literals blanked (newlines kept)."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def functions(text):
    """(name, first line, length) of each function body at file scope."""
    lines = code_only(text).split("\n")
    depth, start, begin, out = 0, None, None, []
    for i, line in enumerate(lines):
        if depth == 0 and line[:1] and not line[0].isspace() and line[0] not in "#}{":
            start = i
        opened = depth
        depth += line.count("{") - line.count("}")
        if opened == 0 and depth > 0 and start is not None:
            sig = " ".join(lines[start:i + 1])
            is_func = "(" in sig and "=" not in sig.split("(")[0] and not re.match(r"\s*(struct|enum|union|typedef)\b", sig)
            begin = start if is_func else None
        if opened > 0 and depth == 0 and begin is not None:
            name = re.findall(r"(\w+)\s*\(", " ".join(lines[begin:begin + 3]))
            out.append((name[0] if name else "?", begin + 1, i - begin + 1))
            begin = None
    return out


def main():
    root = sys.argv[1]
    bad = 0
    for d, subdirs, files in os.walk(root):
        subdirs[:] = [s for s in subdirs if s not in SKIP_DIRS and not s.startswith("build")]
        rel = os.path.relpath(d, root)
        for f in sorted(files):
            path = os.path.join(d, f)
            shown = os.path.normpath(os.path.join(rel, f))
            if not f.endswith((".c", ".cu", ".h")):
                continue
            text = open(path, encoding="utf-8", errors="replace").read()
            n = text.count("\n")
            if shown.split(os.sep)[0] in FILE_DIRS and n > MAX_FILE_LINES:
                print(f"FAIL {shown}: {n} lines (at most {MAX_FILE_LINES} in {', '.join(FILE_DIRS)})")
                bad += 1
            if f.endswith(".h"):
                continue
            for name, line, length in functions(text):
                if length > MAX_FUNC_LINES:
                    print(f"FAIL {shown}:{line}: {name}() is {length} lines (at most {MAX_FUNC_LINES})")
                    bad += 1
    print(f"lengths: {'passed' if not bad else f'{bad} over the limits'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
