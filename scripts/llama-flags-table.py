#!/usr/bin/env python3
"""Regenerates the last section of docs/llama-server.md (every llama-server flag that
tandem serve does not act on) from the table in src/app/llama_flags.cpp:
    python3 scripts/llama-flags-table.py   (rewrites the doc in place)
tests/app/llama_flags_test.sh checks that the doc lists every flag of the table."""
import os
import re

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
src = open(os.path.join(root, "src/app/llama_flags.cpp")).read()


def cstr(x):
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', x)).replace('\\"', '"')


consts = {k: cstr(v) for k, v in re.findall(r'const char\* const (k\w+) =\s*((?:"(?:[^"\\]|\\.)*"\s*)+);', src)}
start = src.index("const Row kRows[] = {")
body = src[start:src.index("};", start)]
rows = re.findall(
    r'\{("(?:[^"\\]|\\.)*"),\s*("(?:[^"\\]|\\.)*"),\s*(nullptr|"[^"]*"),\s*(k\w+),\s*("(?:[^"\\]|\\.)*"),\s*'
    r'((?:k\w+)|(?:"(?:[^"\\]|\\.)*"\s*)+)\}', body, re.S)
lines = ["| flag | variable | tandem | why |", "|---|---|---|---|"]
for names, spellings, env, _, accepts, reason in rows:
    flag = ", ".join("`%s`" % x for x in cstr(spellings).split() + cstr(names).split(","))
    variable = "`%s`" % cstr(env) if env != "nullptr" else ""
    accepts = cstr(accepts)
    what = {"*": "no-op", "": "exit 2"}.get(accepts)
    if what is None:
        what = "no-op with %s; else exit 2" % ", ".join("`%s`" % a for a in accepts.split("|"))
    why = (consts[reason] if reason.startswith("k") else cstr(reason)).replace("|", "\\|")
    lines.append(f"| {flag} | {variable} | {what} | {why} |")
doc_path = os.path.join(root, "docs/llama-server.md")
doc = open(doc_path).read()
doc = doc[:doc.index("| flag | variable | tandem | why |")] + "\n".join(lines) + "\n"
open(doc_path, "w").write(doc)
print(f"docs/llama-server.md: {len(rows)} flags")
