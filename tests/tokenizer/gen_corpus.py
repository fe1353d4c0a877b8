#!/usr/bin/env python3
"""gen_corpus.py - the tokenizer tests' corpus: a JSON array of documents
(strings), made from a fixed seed so every run and every machine gets the
same text. Nothing large is committed; the tests make it at run time.

Usage: gen_corpus.py OUT.json [--mb 1.5] [--seed 1] [--no-sweep] [--kinds prose,code,...]
       gen_corpus.py OUT.json --deviations

Documents are a few KB each (the JavaScript oracle is quadratic in a
document's token count, and a small document makes a mismatch easy to read),
drawn from these kinds in turn until the size is reached:
  prose, code, numbers, whitespace, accented Latin, CJK, emoji, unusual Unicode
followed by the sweep: every character assigned in Unicode 14.0 (the version of
Debian 12's PCRE2 and Python), each in a few contexts; Han and Hangul syllables
sampled one in eight.

Left out on purpose, with the reason (see tests/tokenizer/README.md):
  U+0085 and U+FEFF: the JavaScript encoder's regex disagrees with GPT-2's on
    whether they are white space (JS: U+FEFF is, U+0085 is not; GPT-2's Python
    `regex`: the reverse). test_tokenizer checks them against GPT-2's answer.
  characters assigned after Unicode 14.0: node's tables (Unicode 17) call some
    of them letters or digits, the system PCRE2 (Unicode 14) does not know
    them; which one is "right" depends on the library version, not on us.
  surrogates: not characters; UTF-8 cannot carry them.
--deviations writes instead every string of one to four characters from
{a, space, newline, 1, ., U+0085, U+FEFF, U+180E} holding one of the last
three: where the JavaScript oracle and GPT-2 part, checked against gpt2_ref.py.
"""
import itertools
import json
import random
import sys
import unicodedata

EXCLUDED = {0x85, 0xFEFF}

WORDS = """the of and to in is was that for it with as his on be at by had this not but
from are or an they which one you were her all she there would their we him been
has when who will more no if out so said what up its about into than them can only
other new some could time these two may then do first any my now such like our over
man me even most made after also did many before must through back years where much
your way well down should because each just those people how too little state good
very make world still own see men work long get here between both life being under
never day same another know while last might us great old year off come since against
go came right used take three model token memory throughput offload weights cache
batch layer attention schedule policy disk tier bandwidth latency prompt generation
quick brown fox jumps lazy dog Alice Bob Carol London Paris Tokyo Berlin Monday
January GPU CPU NVMe DRAM FlexGen OPT GPT-2 OpenAI HuggingFace Linux POSIX""".split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D",
                "n't", "'", "''", "'x"]
PUNCT = [".", ",", ";", ":", "!", "?", "...", " -", " --", " —", "!?", ".\"", ",'", ")", "];"]

ACCENTED = """café naïve résumé façade déjà vu Zürich Größe straße Ärger öffnen über
mañana niño acción corazón pingüino Łódź żółć źdźbło gęś Ślęża Dvořák příliš žluťoučký
kůň úpěl ďábelské ódy Tiếng Việt người đẹp không được Ångström Øresund æble Þórr
Ísland coração ação Ελληνικά Καλημέρα κόσμε Привет мир Ёлка щи съешь ещё этих
ĳssel Œuvre œil Ÿ ÿ ß ẞ ŉ ǅ ǈ ǋ ǲ""".split()
COMBINING = ["\u0301", "\u0300", "\u0308", "\u0327", "\u0303", "\u030C", "\u0323", "\u0328",
             "\u20DD", "\u0489", "\u036F", "\u1AB0", "\u1DC0", "\uFE20"]
CJK = ["東京都は日本の首都です", "我们今天去公园散步了", "机器学习模型需要大量的内存",
       "吾輩は猫である。名前はまだ無い。", "ひらがなとカタカナ、漢字が混ざった文章",
       "한국어 텍스트도 포함합니다", "대한민국의 수도는 서울입니다", "全角数字１２３と全角英字ＡＢＣ",
       "「引用」『二重』【括弧】〔亀甲〕", "ｶﾀｶﾅ ﾊﾝｶｸ", "中文，标点。符号！", "繁體中文與簡體中文",
       "𠀀𠀁𠮷野家𪚲", "ㄅㄆㄇㄈ", "〇一二三四五六七八九十百千万億"]
EMOJI = ["😀", "😂", "🥲", "👍", "👍🏽", "👋🏿", "❤️", "❤", "🔥", "✨", "🎉", "🚀", "🤖",
         "👨\u200d👩\u200d👧\u200d👦", "👩\u200d💻", "🏳️\u200d🌈", "🧑🏾\u200d🚀", "🇯🇵", "🇺🇸",
         "🇪🇺", "1️⃣", "#️⃣", "©️", "™", "☀️", "⚡", "🫠", "🪐", "🦀", "🐍", "\U0001F9D1\U0001F3FB"]
UNUSUAL = ["\u200d", "\u200c", "\u200b", "\u2060", "\u00ad", "\u180e", "\u00a0", "\u2007",
           "\u202f", "\u3000", "\u2028", "\u2029", "\u1680", "\u205f", "\x0b", "\x0c", "\x1c",
           "\x1d", "\x1e", "\x1f", "\x00", "\x01", "\x7f", "\u200e", "\u200f", "\u202e",
           "\u2066", "\ufff9", "\ufffc", "\ufffd", "\U000E0041", "\U0001D400", "\U0001D7D8",
           "²", "³", "¹", "¼", "½", "⅞", "Ⅻ", "ⅻ", "ↂ", "①", "⑳", "⓪", "٣", "۴", "१२३",
           "๑๒", "𝟘𝟙", "ℵ", "ℏ", "∑", "∫", "≠", "≤", "√", "∞", "→", "⇒", "⊕", "€", "£",
           "¥", "₹", "₿", "§", "¶", "†", "‡", "•", "…", "‰", "′", "″", "«", "»", "‹", "›",
           "„", "“", "”", "‘", "’", "─", "│", "┌", "╬", "█", "░", "▲", "◆", "★", "♠", "♥",
           "♪", "☃", "☯", "✓", "✗", "\U0001F600\ufe0f", "\ufe0e", "\U000E0100"]
SCRIPTS = ["مرحبا بالعالم", "العربية ١٢٣", "שלום עולם", "עִבְרִית", "नमस्ते दुनिया",
           "हिन्दी में लिखा", "ภาษาไทยไม่มีช่องว่าง", "ქართული", "Հայերեն", "አማርኛ",
           "ᓀᐦᐃᔭᐍᐏᐣ", "ᚠᚢᚦᚨᚱ", "𐌰𐌱𐌲", "ꦗꦮ", "ᠮᠣᠩᠭᠣᠯ\u180eᠪᠢᠴᠢᠭ", "ܐܪܡܝܐ", "ދިވެހި",
           "தமிழ்", "తెలుగు", "ಕನ್ನಡ", "മലയാളം", "ᏣᎳᎩ", "ꓡꓲ", "𝔉𝔯𝔞𝔨𝔱𝔲𝔯", "Ｆｕｌｌ"]


def prose(r):
    out = []
    for _ in range(r.randint(20, 60)):
        n = r.randint(3, 18)
        words = [r.choice(WORDS) for _ in range(n)]
        words[0] = words[0].capitalize()
        for i in range(n):
            x = r.random()
            if x < 0.08:
                words[i] += r.choice(CONTRACTIONS)
            elif x < 0.12:
                words[i] = '"' + words[i] + '"'
            elif x < 0.15:
                words[i] = "(" + words[i] + ")"
            elif x < 0.18:
                words[i] = words[i].upper()
            elif x < 0.20:
                words[i] += str(r.randint(0, 9999))
        out.append(" ".join(words) + r.choice(PUNCT))
        out.append(r.choice([" ", " ", " ", "  ", "\n", "\n\n", " \n", "\t"]))
    return "".join(out)


CODE_SNIPPETS = [
    "int main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++) {\n"
    "        printf(\"%s\\n\", argv[i]);\n    }\n    return 0;\n}\n",
    "def fib(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
    "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\nprint(fib(10))  # 55\n",
    "const xs = [1, 2, 3].map(x => x * 2);\nif (xs.length !== 3) throw new Error('bad');\n"
    "export default { xs, ok: true };\n",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n\tstatic const char *s = \"tab\\tbed\";\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;\n",
    "<div class=\"row\"><span id='x'>&nbsp;&lt;tag&gt;</span></div>\n",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![0xFF; 16];\n"
    "    println!(\"{:?}\", &v[..4]);\n    Ok(())\n}\n",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\\u00e9\"}}\n",
    "    if x:\n\t\treturn y\n        else:\n            pass\n\n\n\n",
    "$ ls -la | grep '^d' && echo \"done\" >> log.txt 2>&1 || exit 1\n",
    "a+=b;c-=d;e*=f;g/=h;i%=j;k<<=1;l>>=2;m&&n||o;p!==q;r===s;t=>u;v::w;x->y;\n",
    "// comment with TODO: fix   trailing spaces   \n/* block\n * comment */\n",
]


def code(r):
    parts = []
    for _ in range(r.randint(3, 10)):
        s = r.choice(CODE_SNIPPETS)
        if r.random() < 0.3:
            s = s.replace("    ", "\t")
        if r.random() < 0.2:
            s = s.replace("\n", "\r\n")
        parts.append(s)
    return "".join(parts)


def numbers(r):
    out = []
    for _ in range(r.randint(80, 200)):
        k = r.randint(0, 11)
        if k == 0: s = str(r.randint(0, 10 ** r.randint(1, 25)))
        elif k == 1: s = f"{r.uniform(-1e6, 1e6):.{r.randint(0, 8)}f}"
        elif k == 2: s = f"{r.randint(0, 999)},{r.randint(0, 999):03d},{r.randint(0, 999):03d}.{r.randint(0, 99):02d}"
        elif k == 3: s = f"{r.randint(1900, 2100)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:00Z"
        elif k == 4: s = f"0x{r.getrandbits(r.randint(4, 64)):x}"
        elif k == 5: s = f"{r.uniform(0, 10):.3e}"
        elif k == 6: s = f"+1 ({r.randint(200, 999)}) {r.randint(100, 999)}-{r.randint(1000, 9999)}"
        elif k == 7: s = f"{r.randint(0, 100)}%"
        elif k == 8: s = f"${r.randint(0, 10 ** 6)}.{r.randint(0, 99):02d}"
        elif k == 9: s = f"v{r.randint(0, 9)}.{r.randint(0, 20)}.{r.randint(0, 99)}-rc{r.randint(1, 3)}"
        elif k == 10: s = "".join(r.choice("0123456789") for _ in range(r.randint(20, 120)))
        else: s = f"{r.randint(1, 9)}/{r.randint(1, 9)} {r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}"
        out.append(s)
        out.append(r.choice([" ", ", ", "\n", "; ", " x ", "\t", " = "]))
    return "".join(out)


def whitespace(r):
    ws = [" ", "\n", "\t", "\r\n", "\r", "\x0b", "\x0c", "\u00a0", "\u3000", "\u2003", "\u2028"]
    out = []
    for _ in range(r.randint(40, 120)):
        run_len = r.choice([1, 1, 2, 3, 4, 7, 8, 15, 16, 33, 80, 200, 513])
        run = "".join(r.choice(ws[:3]) if r.random() < 0.8 else r.choice(ws) for _ in range(run_len))
        if r.random() < 0.3:
            run = " " * run_len
        out.append(run)
        out.append(r.choice(WORDS + ["", "", "'s", "123", "!!", "é", "中文", "\U0001F600"]))
    return "".join(out)


def accented(r):
    out = []
    for _ in range(r.randint(60, 200)):
        w = r.choice(ACCENTED)
        x = r.random()
        if x < 0.25:
            w = unicodedata.normalize("NFD", w)
        elif x < 0.35:
            w = w + "".join(r.choice(COMBINING) for _ in range(r.randint(1, 4)))
        elif x < 0.40:
            w = w.upper()
        out.append(w)
        out.append(r.choice([" ", " ", ", ", ". ", "\n", "'s ", "-"]))
    return "".join(out)


def cjk(r):
    out = []
    for _ in range(r.randint(20, 60)):
        n = r.randint(1, 8)
        out.append("".join(r.choice(CJK) for _ in range(n)))  # long runs: one \p{L}+ piece
        out.append(r.choice(["", " ", "。", "\n", "、", " 123 ", "Ａ", "abc"]))
    return "".join(out)


def emoji(r):
    out = []
    for _ in range(r.randint(100, 300)):
        x = r.random()
        if x < 0.5:
            out.append("".join(r.choice(EMOJI) for _ in range(r.randint(1, 6))))
        else:
            out.append(r.choice(WORDS))
        out.append(r.choice([" ", "", "\n", "! ", " :) "]))
    return "".join(out)


def unusual(r):
    out = []
    for _ in range(r.randint(100, 300)):
        x = r.random()
        if x < 0.35:
            out.append("".join(r.choice(UNUSUAL) for _ in range(r.randint(1, 5))))
        elif x < 0.55:
            out.append(r.choice(SCRIPTS))
        elif x < 0.70:  # zalgo: a letter under a stack of combining marks
            out.append(r.choice("aeiouxyzAEZ") + "".join(r.choice(COMBINING) for _ in range(r.randint(1, 12))))
        else:
            out.append(r.choice(WORDS))
        out.append(r.choice([" ", "", "\n", "'", "' ", "  "]))
    return "".join(out)


KINDS = [prose, code, numbers, whitespace, accented, cjk, emoji, unusual]


def sweep_chars():
    """Assigned characters of Unicode 14.0 (or 3.2 when the Python at hand has
    other tables, which keeps the corpus inside what every library knows)."""
    db = unicodedata if unicodedata.unidata_version == "14.0.0" else unicodedata.ucd_3_2_0
    if db is not unicodedata:
        print(f"gen_corpus: note: Python's Unicode is {unicodedata.unidata_version}, "
              "sweeping Unicode 3.2 characters only", file=sys.stderr)
    for cp in range(0x110000):
        c = chr(cp)
        cat = db.category(c)
        if cat in ("Cn", "Cs") or cp in EXCLUDED:
            continue
        if (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x3134F
                or 0xAC00 <= cp <= 0xD7A3) and cp % 8:
            continue
        if cat == "Co" and cp % 64:  # private use: all alike
            continue
        yield c


def sweep_docs(r):
    docs, cur = [], []
    size = 0
    for c in sweep_chars():
        # alone, doubled, inside a word, after a space, next to digits and a
        # contraction: each alternative of the pattern meets the character
        ctx = r.choice(["{c}", "{c}{c}", "a{c}b", " {c}", "1{c}2", "{c}'s", "{c} ", "x {c}{c}y"])
        s = ctx.format(c=c)
        cur.append(s)
        size += len(s.encode("utf-8", "surrogatepass"))
        if size > 2048:
            docs.append(" ".join(cur))
            cur, size = [], 0
    if cur:
        docs.append(" ".join(cur))
    return docs


def deviation_docs():
    odd = ["\x85", "\ufeff", "\u180e"]
    alphabet = ["a", " ", "\n", "1", "."] + odd
    return ["".join(p) for n in range(1, 5) for p in itertools.product(alphabet, repeat=n)
            if any(c in odd for c in p)]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if args[1:] == ["--deviations"]:
        with open(args[0], "w", encoding="utf-8") as f:
            json.dump(deviation_docs(), f, ensure_ascii=False)
        return
    out, mb, seed, sweep, kinds = args[0], 1.5, 1, True, KINDS
    i = 1
    while i < len(args):
        if args[i] == "--mb": mb = float(args[i + 1]); i += 2
        elif args[i] == "--seed": seed = int(args[i + 1]); i += 2
        elif args[i] == "--no-sweep": sweep = False; i += 1
        elif args[i] == "--kinds":  # only these kinds, no sweep
            names = args[i + 1].split(",")
            kinds = [k for k in KINDS if k.__name__ in names]
            if len(kinds) != len(names): sys.exit(f"gen_corpus: kinds are {[k.__name__ for k in KINDS]}")
            sweep = False
            i += 2
        else: sys.exit(f"gen_corpus: unknown option {args[i]}")
    r = random.Random(seed)
    docs, total, k = [], 0, 0
    while total < mb * 1e6:
        d = kinds[k % len(kinds)](r)
        k += 1
        docs.append(d)
        total += len(d.encode("utf-8"))
    if sweep:
        for d in sweep_docs(r):
            docs.append(d)
            total += len(d.encode("utf-8"))
    for d in docs:
        assert not any(ord(ch) in EXCLUDED for ch in d)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(docs, f, ensure_ascii=False)
    print(f"gen_corpus: {len(docs)} documents, {total} bytes -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
