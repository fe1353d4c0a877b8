#!/usr/bin/env python3
"""make_batch.py - writes a mixed OpenAI Batch API input file for the tests and
the bench: N requests, chat and completions alternating irregularly, max_tokens
1..64, greedy and sampled (temperatures, top-p), seeded and unseeded, stop
strings (a string or a list), prompts as text or token ids; with --bad, five
malformed lines at fixed places (not JSON, no custom_id, no body, an unknown
url, a prompt longer than the model's context), and prints their 1-based
line numbers to stderr as JSON.
Usage: make_batch.py OUT N [--bad] [--max-pos P] [--seed S]"""
import json
import random
import sys

args = sys.argv[1:]
out, n = args[0], int(args[1])
bad = "--bad" in args
max_pos = int(args[args.index("--max-pos") + 1]) if "--max-pos" in args else 128
rnd = random.Random(int(args[args.index("--seed") + 1]) if "--seed" in args else 11)
words = ["low", "lower", "newest", "widest", "new", "wide", "est", "the", "a", "lo", "w", "er"]

lines = []
for i in range(n):
    chat = rnd.random() < 0.5
    text = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 8)))
    body = {"model": "opt-test", "max_tokens": rnd.randint(1, 64)}
    mode = rnd.choice(["greedy", "greedy", "seeded", "seeded", "unseeded"])
    if mode != "greedy":
        body["temperature"] = rnd.choice([0.5, 0.8, 1.0, 1.3])
        if rnd.random() < 0.5:
            body["top_p"] = rnd.choice([0.5, 0.9])
    if mode == "seeded":
        body["seed"] = rnd.randint(0, 2**31)
    elif mode == "greedy" and rnd.random() < 0.3:
        body["temperature"] = 0
    r = rnd.random()
    if r < 0.2:
        body["stop"] = rnd.choice(words)
    elif r < 0.35:
        body["stop"] = rnd.sample(words, 2)
    if chat:
        content = text if rnd.random() < 0.6 else [{"type": "text", "text": t} for t in text.split(" ", 1)]
        body["messages"] = [{"role": "user", "content": content}]
        url = "/v1/chat/completions"
    else:
        if rnd.random() < 0.25:
            body["prompt"] = [2] + [rnd.randrange(4, 500) for _ in range(rnd.randint(1, 10))]
        else:
            body["prompt"] = text
        if rnd.random() < 0.3:
            body["max_completion_tokens"] = body.pop("max_tokens")
        url = "/v1/completions"
    lines.append(json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": url, "body": body}))

bad_at = []
if bad:
    malformed = [
        '{"custom_id": "broken-1", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x"',
        json.dumps({"method": "POST", "url": "/v1/completions", "body": {"prompt": "no id", "max_tokens": 2}}),
        json.dumps({"custom_id": "nobody", "method": "POST", "url": "/v1/completions"}),
        json.dumps({"custom_id": "embed", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}),
        json.dumps({"custom_id": "too-long", "method": "POST", "url": "/v1/completions",
                    "body": {"prompt": [2] + [5] * max_pos, "max_tokens": 4}}),
    ]
    for k, m in enumerate(malformed):
        at = 7 + k * (len(lines) // 5)
        lines.insert(at, m)
        bad_at.append(at + 1)
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print(json.dumps(bad_at), file=sys.stderr)
