#!/usr/bin/env python3
"""gen_hf_corpus.py - the tokenizer.json tests' corpus: documents nobody here
wrote, read from this machine (Debian's /usr/share and friends), cut into
pieces of a few KB at line ends, written as a JSON array of strings. The
choice is deterministic (sorted paths, a fixed stride), so every run on one
machine gets the same documents; nothing is committed.

Usage: gen_hf_corpus.py OUT.json [--max-kb 700] [--list]

Kinds (each taken where the machine has it; the count per kind is printed):
  license    /usr/share/common-licenses/*
  copyright  /usr/share/doc/*/copyright
  man        manual pages in other languages, /usr/share/man/LANG/man*/ (roff)
  catalog    gettext catalogs, /usr/share/locale/LANG/LC_MESSAGES/*.mo: the
             translations of one catalog per language (Arabic, Hindi, Thai,
             Chinese, Amharic, Georgian, ... scripts of every kind)
  compose    X11 Compose tables (symbols, accents, arrows, emoji)
  locale     /usr/share/i18n/locales/*
  code       C headers (/usr/include), Python and Perl sources
  markdown   node's documentation (/usr/share/doc/nodejs; holds emoji)
  vimdoc     vim's help (digraphs, multibyte)
  mixed      pieces of the above joined with runs of white space (spaces,
             tabs, CR LF, blank lines) and emoji sequences (ZWJ families,
             skin tones, flags, keycaps) between them: the kinds of text a
             tokenizer's white-space and symbol rules decide
"""
import glob
import gzip
import gettext
import json
import os
import random
import sys

CHUNK = 3000  # characters a document holds at most


def read_text(path):
    try:
        data = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    except OSError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def chunks(text, limit, first_only=False):
    """Pieces of at most CHUNK characters, cut after a newline."""
    out, cur = [], []
    size = 0
    for line in text.splitlines(keepends=True):
        while len(line) > CHUNK:  # a single huge line: cut it anyway
            out.append(line[:CHUNK])
            line = line[CHUNK:]
        if size + len(line) > CHUNK and cur:
            out.append("".join(cur))
            cur, size = [], 0
            if first_only or len(out) >= limit:
                break
        cur.append(line)
        size += len(line)
    if cur and len(out) < limit and not (first_only and out):
        out.append("".join(cur))
    return [c for c in out[:limit] if c.strip()]


def stride(paths, n):
    paths = sorted(paths)
    if len(paths) <= n:
        return paths
    step = len(paths) / n
    return [paths[int(i * step)] for i in range(n)]


def catalog_text(path):
    try:
        with open(path, "rb") as f:
            cat = gettext.GNUTranslations(f)
    except Exception:
        return None
    msgs = [v for k, v in sorted(cat._catalog.items(), key=lambda kv: str(kv[0])) if k and isinstance(v, str)]
    return "\n".join(msgs) if msgs else None


def files(kind):
    if kind == "license":
        return sorted(glob.glob("/usr/share/common-licenses/*"))
    if kind == "copyright":
        return stride(glob.glob("/usr/share/doc/*/copyright"), 60)
    if kind == "man":
        langs = sorted(d for d in os.listdir("/usr/share/man") if not d.startswith("man")) \
            if os.path.isdir("/usr/share/man") else []
        return [p for lang in langs for p in stride(glob.glob(f"/usr/share/man/{lang}/man[1-8]/*.gz"), 3)]
    if kind == "catalog":
        out = []
        for d in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES")):
            mos = sorted(glob.glob(d + "/*.mo"), key=lambda p: (-os.path.getsize(p), p))
            mos = [p for p in mos if not os.path.basename(p).startswith("iso_")] or mos
            if mos:
                out.append(mos[0])
        return stride(out, 70)
    if kind == "compose":
        return sorted(glob.glob("/usr/share/X11/locale/*.UTF-8/Compose"))[:4]
    if kind == "locale":
        return stride(glob.glob("/usr/share/i18n/locales/*"), 10)
    if kind == "code":
        return (stride(glob.glob("/usr/include/*.h"), 12) + stride(glob.glob("/usr/lib/python3*/*.py"), 12) +
                stride(glob.glob("/usr/share/perl/*/*.pm"), 6))
    if kind == "markdown":
        return stride(glob.glob("/usr/share/doc/nodejs/**/*.md", recursive=True), 12)
    if kind == "vimdoc":
        return [p for p in sorted(glob.glob("/usr/share/vim/vim*/doc/*.txt"))
                if os.path.basename(p) in ("digraph.txt", "mbyte.txt", "arabic.txt", "hangulin.txt",
                                           "russian.txt", "vietnamese.txt", "pattern.txt")]
    return []


EMOJI = ["\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466", "\U0001F44D\U0001F3FD",
         "\U0001F1EF\U0001F1F5", "\U0001F1E9\U0001F1EA", "1\uFE0F\u20E3", "\u2764\uFE0F", "\U0001F600",
         "\U0001F9D1\U0001F3FF\u200D\U0001F4BB", "\U0001F3F3\uFE0F\u200D\U0001F308", "\u263A"]
SPACES = ["  ", "\t", "\t\t  ", "\n\n\n", "\r\n", " \r\n\r\n ", "    \n    ", "\u00A0", "\u3000", "\u2003 "]


def mixed(pool, n, rng):
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(4, 9)):
            src = rng.choice(pool)
            a = rng.randrange(max(1, len(src) - 300))
            parts.append(src[a:a + rng.randint(20, 300)])
            parts.append(rng.choice(SPACES) * rng.randint(1, 3))
            if rng.random() < 0.6:
                parts.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4))))
        out.append("".join(parts))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_path = sys.argv[1]
    max_kb = int(sys.argv[sys.argv.index("--max-kb") + 1]) if "--max-kb" in sys.argv else 700
    docs, kinds = [], []
    per_kind = {"license": 2, "copyright": 1, "man": 1, "catalog": 1, "compose": 3, "locale": 1, "code": 1,
                "markdown": 2, "vimdoc": 2}
    if max_kb > 700:  # a bigger corpus (the benchmark's): more pieces of each file
        per_kind = {k: v * 3 for k, v in per_kind.items()}
    for kind, limit in per_kind.items():
        for path in files(kind):
            text = catalog_text(path) if kind == "catalog" else read_text(path)
            if not text:
                continue
            for c in chunks(text, limit):
                docs.append(c)
                kinds.append(kind)
    rng = random.Random(1)
    extra = mixed(docs, 40, rng) if docs else []
    docs += extra
    kinds += ["mixed"] * len(extra)
    # stay within the size asked for: drop every k-th document of the big kinds
    while sum(len(d.encode()) for d in docs) > max_kb * 1024:
        big = max(set(kinds), key=kinds.count)
        i = max(i for i, k in enumerate(kinds) if k == big)
        del docs[i], kinds[i]
    json.dump(docs, open(out_path, "w", encoding="utf-8"), ensure_ascii=False)
    counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
    nbytes = sum(len(d.encode()) for d in docs)
    print(f"gen_hf_corpus: {len(docs)} documents, {nbytes} bytes: " +
          ", ".join(f"{k} {v}" for k, v in counts.items()))
    if "--list" in sys.argv:
        json.dump(kinds, open(out_path + ".kinds", "w"))


if __name__ == "__main__":
    main()
