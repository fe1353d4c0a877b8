// llamacpp_bench.mjs - llama.cpp's side of bench/bench_llamacpp.sh: loads a
// GGUF file through node-llama-cpp (its prebuilt CPU build, the one
// scripts/fetch-llamacpp.sh installs) and generates GEN new tokens greedily
// for every prompt (token ids as given: nothing tokenized, no BOS added, EOS
// not checked, so every prompt gets exactly GEN tokens), all prompts at once
// as parallel sequences of one context, and prints one JSON line.
//
//   node llamacpp_bench.mjs --lib DIR --model F.gguf --prompt-ids P.json
//        --gen-len N [--threads 2] [--batch auto|N] [--sequential 0|1]
//
// All prompts at once: a context with `sequences: n` and each sequence's
// controlledEvaluate called together; node-llama-cpp's batching (default
// "maximumParallelism") puts every sequence's pending tokens into one
// llama_decode batch, as llama.cpp's parallel example does, so each step of
// the n sequences is one pass over the weights. --sequential 1 runs the
// prompts one after another on one sequence instead.
// The batch size (n_batch, tokens per llama_decode) defaults to all the
// prompts' tokens (at most 4096), so the prefill is one pass over the
// weights as well.
//
// The printed "gen_s" is the seconds from the first prompt token submitted
// to the last new token returned: the prompts' evaluation (prefill) and GEN
// greedy steps of every sequence, with the sampling; not the model's load or
// the context's creation ("load_s"). "prefill_s" is until every sequence
// has its first new token. Threads: node-llama-cpp's maxThreads defaults to
// max(cores, 4), 4 on this 2-core host, so it is set to --threads too; the
// weights are mmapped (llama.cpp's default: pages come from the page cache,
// read on demand where the file is larger than memory) and not mlocked.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

function parseArgs(argv) {
  const a = { threads: "2", batch: "auto", sequential: "0" };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (argv[i + 1] === undefined) throw new Error(`flag ${argv[i]} needs a value`);
    a[k] = argv[i + 1];
  }
  for (const k of ["lib", "model", "promptIds", "genLen"])
    if (a[k] === undefined) throw new Error(`missing --${k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}`);
  return { ...a, genLen: Number(a.genLen), threads: Number(a.threads), sequential: a.sequential === "1" };
}

// GEN greedy tokens after the prompt on one sequence; the time of its first.
async function decode(seq, prompt, genLen, t0) {
  const next = { generateNext: { token: true, options: { temperature: 0 } } };
  const tokens = [];
  let first = 0;
  let items = prompt.map((t, i) => (i === prompt.length - 1 ? [t, next] : t));
  for (let s = 0; s < genLen; s++) {
    const out = await seq.controlledEvaluate(items);
    const tok = out[items.length - 1]?.next?.token;
    if (tok == null) throw new Error("llama.cpp returned no next token");
    if (s === 0) first = performance.now() - t0;
    tokens.push(tok);
    items = [[tok, next]];
  }
  return { tokens, first };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const entry = join(a.lib, "node_modules", "node-llama-cpp", "dist", "index.js");
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  const prompts = JSON.parse(readFileSync(a.promptIds, "utf8"));
  const n = prompts.length, longest = Math.max(...prompts.map((p) => p.length));
  const total = prompts.reduce((s, p) => s + p.length, 0);
  const tl = performance.now();
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: a.threads });
  const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0, useMmap: true, useMlock: false,
                                        ignoreMemorySafetyChecks: true });
  const nseq = a.sequential ? 1 : n;
  const batch = a.batch === "auto" ? Math.min(4096, a.sequential ? longest : total) : Number(a.batch);
  const context = await model.createContext({
    contextSize: nseq * (longest + a.genLen + 8), batchSize: batch, sequences: nseq,
    threads: { ideal: a.threads, min: a.threads }, ignoreMemorySafetyChecks: true,
  });
  const seqs = Array.from({ length: nseq }, () => context.getSequence());
  const load_s = (performance.now() - tl) / 1e3;
  const t0 = performance.now();
  let results;
  if (a.sequential) {
    results = [];
    for (const p of prompts) {
      await seqs[0].clearHistory();
      results.push(await decode(seqs[0], p, a.genLen, t0));
    }
  } else {
    results = await Promise.all(prompts.map((p, i) => decode(seqs[i], p, a.genLen, t0)));
  }
  const gen_s = (performance.now() - t0) / 1e3;
  const generated = results.reduce((s, r) => s + r.tokens.length, 0);
  console.log(JSON.stringify({
    engine: "llama.cpp", prompts: n, gen_len: a.genLen, generated_tokens: generated, gen_s, load_s,
    prefill_s: a.sequential ? results[0].first / 1e3 : Math.max(...results.map((r) => r.first)) / 1e3,
    tokens_per_s: generated / gen_s, threads: a.threads, batch_size: batch,
    mode: a.sequential ? "sequential" : `${nseq} sequences in one context`, tokens: results.map((r) => r.tokens),
  }));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error("llamacpp_bench: error: " + (e?.stack ?? e));
  process.exit(1);
});
