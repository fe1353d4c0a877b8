#!/usr/bin/env python3
"""compare_ids.py - holds the C tokenizer's ids against the oracle's, one
document at a time, and names every document that differs (its index, kind of
text, the first differing token and the text around it).

Usage: compare_ids.py CORPUS.json A_IDS.json B_IDS.json [--differ-only-with U+0085,U+FEFF]
Exit 0 when every document's ids are identical, 1 otherwise. With
--differ-only-with, documents may differ only when they hold one of those
characters (a documented deviation of one side), and their count is printed."""
import json
import sys


def main():
    allowed = None
    if len(sys.argv) == 6 and sys.argv[4] == "--differ-only-with":
        allowed = {chr(int(u[2:], 16)) for u in sys.argv[5].split(",")}
    elif len(sys.argv) != 4:
        sys.exit(__doc__)
    docs = json.load(open(sys.argv[1], encoding="utf-8"))
    c = json.load(open(sys.argv[2]))
    o = json.load(open(sys.argv[3]))
    if not (len(docs) == len(c) == len(o)):
        sys.exit(f"compare_ids: document counts differ: corpus {len(docs)}, C {len(c)}, oracle {len(o)}")
    bad = 0
    tokens = 0
    excused = 0
    for i, (d, a, b) in enumerate(zip(docs, c, o)):
        tokens += len(b)
        if a == b:
            continue
        if allowed and any(ch in allowed for ch in d):
            excused += 1
            continue
        bad += 1
        if bad <= 10:
            k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            print(f"document {i}: {len(a)} ids from C, {len(b)} from the oracle; first difference "
                  f"at token {k}: C {a[k:k + 6]} oracle {b[k:k + 6]}")
            print(f"  text: {json.dumps(d[:200], ensure_ascii=True)}{'...' if len(d) > 200 else ''}")
    nbytes = sum(len(d.encode('utf-8')) for d in docs)
    print(f"compare_ids: {len(docs)} documents, {nbytes} bytes, {tokens} tokens: "
          f"{len(docs) - bad - excused} identical, {bad} different"
          + (f", {excused} different where allowed ({sys.argv[5]})" if allowed else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
