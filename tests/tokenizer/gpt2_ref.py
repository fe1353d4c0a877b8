#!/usr/bin/env python3
"""gpt2_ref.py - GPT-2's own encoder (openai/gpt-2, src/encoder.py, MIT
licence), transcribed: a second reference beside the JavaScript one, used for
the characters where the JavaScript encoder's regex departs from GPT-2's
(U+0085, U+FEFF). Needs Python's `regex` module (Debian: python3-regex), as
GPT-2 does; the test that runs it is skipped without it.

Usage: gpt2_ref.py GPT2_DIR CORPUS.json OUT.json"""
import json
import sys

import regex as re


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2 ** 8):
        if b not in bs:
            bs.append(b)
            cs.append(2 ** 8 + n)
            n += 1
    return dict(zip(bs, [chr(n) for n in cs]))


def get_pairs(word):
    return set(zip(word, word[1:]))


class Encoder:
    def __init__(self, encoder, bpe_merges):
        self.encoder = encoder
        self.byte_encoder = bytes_to_unicode()
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}
        self.pat = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float('inf')))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = ' '.join(word)
        self.cache[token] = word
        return word

    def encode(self, text):
        bpe_tokens = []
        for token in re.findall(self.pat, text):
            token = ''.join(self.byte_encoder[b] for b in token.encode('utf-8'))
            bpe_tokens.extend(self.encoder[bpe_token] for bpe_token in self.bpe(token).split(' '))
        return bpe_tokens


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    d = sys.argv[1]
    with open(d + "/encoder.json") as f:
        encoder = json.load(f)
    with open(d + "/vocab.bpe", encoding="utf-8") as f:
        bpe_data = f.read()
    merges = [tuple(s.split()) for s in bpe_data.split("\n")[1:-1]]
    e = Encoder(encoder, merges)
    docs = json.load(open(sys.argv[2], encoding="utf-8"))
    json.dump([e.encode(x) for x in docs], open(sys.argv[3], "w"))


if __name__ == "__main__":
    main()
