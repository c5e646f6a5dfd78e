#!/usr/bin/env python3
"""Checks that no C++ / CUDA function is longer than a limit without a written reason.

A function's length is counted from the first line of its signature to its closing brace.
A function over the limit passes only when the comment block directly above its signature
contains "Long on purpose:" followed by the reason. Functions nested in other function
bodies (lambdas, local classes) count as part of the function around them.

  scripts/check-function-size.py [--limit N] [--list] [FILE...]

Without files it checks every C++ / CUDA file git tracks. Exit 0: every function fits or
has its reason; 1: some do not (listed); 77: not a git checkout and no files (skipped).
--list prints every function over the limit, exempt or not, longest first.
"""
import argparse
import re
import subprocess
import sys

MARKER = "long on purpose:"
CONTROL = re.compile(
    r"^(if|for|while|switch|catch|do|else|return|namespace|class|struct|enum|union|extern)\b")
RECORD = re.compile(r"^(template\s*<.*>\s*)?(class|struct|union|enum)\b")


def blank_out(text):
    """`text` with comments, string / char literals and preprocessor lines replaced by
    spaces (newlines kept), so braces and semicolons in them do not count."""
    out, i, n = [], 0, len(text)

    def spaces(a, b):
        return "".join(ch if ch == "\n" else " " for ch in text[a:b])

    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(text[i]); i += 1; continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
        elif text[i] in "\"'":
            if text[i] == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(text[i]); i += 1; continue
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif text[i] == "#" and text[:i].rstrip(" \t").endswith(("\n", "")) and \
                (i == 0 or text[text.rfind("\n", 0, i) + 1:i].strip() == ""):
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    j = n; break
                if text[k - 1] == "\\":
                    j = k + 1; continue
                j = k; break
        else:
            out.append(text[i]); i += 1; continue
        out.append(spaces(i, j)); i = j
    return "".join(out)


def functions(text):
    """(name, first line, line count) of every function body outside other function bodies."""
    code = blank_out(text)
    stack, last_stop, found = [], 0, []
    for i, ch in enumerate(code):
        if ch == "{":
            header = " ".join(code[last_stop:i].split())
            in_function = any(kind == "function" for kind, *_ in stack)
            is_function = (not in_function and ")" in header and not CONTROL.match(header)
                           and not header.startswith("[") and not header.endswith("=")
                           and not RECORD.match(header) and not header.endswith("]"))
            if is_function:
                names = re.findall(r"([~\w:]+)\s*(?:<[^()]*>)?\s*\(", header)
                name = names[0] if names else "?"
                lead = len(code[last_stop:i]) - len(code[last_stop:i].lstrip())
                first = code.count("\n", 0, last_stop + lead) + 1
                stack.append(("function", name, first))
            else:
                stack.append(("scope",))
            last_stop = i + 1
        elif ch == "}":
            if stack:
                kind, *rest = stack.pop()
                if kind == "function":
                    name, first = rest
                    found.append((name, first, code.count("\n", 0, i) + 1 - first + 1))
            last_stop = i + 1
        elif ch == ";":
            last_stop = i + 1
    return found


def has_reason(lines, first):
    """True when the comment block directly above line `first` (1-based) gives a reason."""
    k = first - 2
    while k >= 0 and lines[k].strip().startswith("template"):
        k -= 1
    while k >= 0 and lines[k].strip().startswith("//"):
        if MARKER in lines[k].lower():
            return True
        k -= 1
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files
    if not files:
        try:
            files = subprocess.check_output(
                ["git", "ls-files", "*.h", "*.cpp", "*.cu", "*.cuh"], text=True,
                stderr=subprocess.DEVNULL).split()
        except (OSError, subprocess.CalledProcessError):
            print("check-function-size: not a git checkout; skipped")
            return 77
    long_ones = []
    for path in files:
        try:
            text = open(path, encoding="utf-8").read()
        except FileNotFoundError:
            continue
        lines = text.splitlines()
        for name, first, count in functions(text):
            if count > args.limit:
                long_ones.append((count, path, first, name, has_reason(lines, first)))
    long_ones.sort(key=lambda r: (-r[0], r[1], r[2]))
    if args.list:
        for count, path, first, name, exempt in long_ones:
            print(f"{count:5d}  {path}:{first}  {name}{'  (reason given)' if exempt else ''}")
        return 0
    bad = [r for r in long_ones if not r[4]]
    if bad:
        print(f"check-function-size: {len(bad)} function(s) over {args.limit} lines without a "
              f"'Long on purpose:' comment above them:")
        for count, path, first, name, _ in bad:
            print(f"  {path}:{first}  {name}  ({count} lines)")
        return 1
    print(f"check-function-size: {len(files)} files; every function is at most {args.limit} "
          f"lines or says why ({sum(1 for r in long_ones if r[4])} do)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
