// Checks ffn-trace's next-token distribution against a recent llama.cpp's, through the npm package
// node-llama-cpp and the prebuilt CPU llama.cpp it ships: the architectures the llama.cpp of
// scripts/compare-llama-cpp.sh predates (gemma3, qwen3), and the others as a control. Not a test: it
// needs node-llama-cpp installed (scripts/compare-node-llama-cpp.sh does that) and a minute or two.
//
//   node scripts/compare_node_llama_cpp.mjs FILE[=LLAMA_FILE]... [-- PROMPT...]
//
// LLAMA_FILE is what llama.cpp runs when it is not FILE itself: an F32 copy holding the numbers of a
// quantized FILE (llama.cpp on a quantized file rounds each activation to 8 or 16 bits before the
// product; that run is shown too, as "(llama.cpp on FILE itself)").
//
// For each file and prompt: the prompt's token ids from llama.cpp (llama_tokenize with its special
// tokens added and matched in the text) and from `ffn-trace tokenize`; then, on llama.cpp's ids,
// llama.cpp's probabilities of every token of the vocabulary at every position, against ffn-trace's
// `run --layer LAST --top 1000`: at the last token the probabilities of the 1000 tokens ffn-trace
// ranks highest (its `prediction`, a softmax over the whole vocabulary in float64), and at every
// token the same 1000 tokens' log-probabilities minus the top one's (its last layer's lens, which is
// the model's logits: the normalizer cancels, so no token outside the 1000 is needed).
// llama.cpp's probabilities are float32 (a softmax of its float32 logits): a log-probability is only
// compared where the probability is a normal float32 (above 1.2e-38).
//
// Environment: FFN_TRACE (build/ffn-trace), NODE_LLAMA_CPP (the folder whose node_modules holds
// node-llama-cpp; build/node-llama-cpp).
import { execFileSync } from "child_process";
import fs from "fs";
import { createRequire } from "module";
import path from "path";
import { fileURLToPath, pathToFileURL } from "url";

const here = path.dirname(fileURLToPath(import.meta.url));
const ffnTrace = process.env.FFN_TRACE ?? path.join(here, "..", "build", "ffn-trace");
const modulesDir = process.env.NODE_LLAMA_CPP ?? path.join(here, "..", "build", "node-llama-cpp");
const TOP = 1000;
const NORMAL_F32 = 1.1754943508222875e-38;

const defaultPrompts = [
  "The capital of France is Paris, and 2024's capital of",
  "Hello world! 123 4567 it's   spaced\n\nnew lines",
  "naïve café 東京 🙂",
];

function usage() {
  console.error("usage: node scripts/compare_node_llama_cpp.mjs FILE[=LLAMA_FILE]... [-- PROMPT...]");
  process.exit(2);
}

function ffn(args) {
  return JSON.parse(execFileSync(ffnTrace, args, { encoding: "utf8", maxBuffer: 1 << 30 }));
}

// What ffn-trace says of one prompt: its token ids, the last layer's logits of the top tokens at
// every position (ids and logits) and the prediction's probabilities at the last.
function ffnTraceRun(file, prompt) {
  const ids = ffn(["tokenize", "--checkpoint", file, "--format", "json", prompt]).token_ids;
  const first = ffn(["run", "--checkpoint", file, "--prompt", prompt, "--layer", "0", "--top", "1", "--detail", "summary",
                     "--format", "json"]);
  const t = ffn(["run", "--checkpoint", file, "--prompt", prompt, "--layer", String(first.n_layers - 1), "--top", String(TOP),
                 "--detail", "summary", "--format", "json"]);
  return { ids, runIds: t.prompt.token_ids, lens: t.lens.map((l) => l.after), prediction: t.prediction.top };
}

// llama.cpp's probabilities of every token at every position of `tokens`, as Float64Arrays by id.
async function llamaRun(llama, file, text) {
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0, useMmap: true });
  try {
    let tokens = model.tokenize(text, true);
    if (model.tokens.shouldPrependBosToken) tokens = [model.tokens.bos, ...tokens];
    if (model.tokens.shouldAppendEosToken) tokens = [...tokens, model.tokens.eos];
    const context = await model.createContext({
      contextSize: 512, batchSize: 512, sequences: 1, threads: 2, flashAttention: false,
      // float32's numbers, not llama.cpp's storage choices (its cache is F16 by default)
      experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", swaFullCache: true,
    });
    try {
      const sequence = context.getSequence();
      // temperature 1 with top-k, top-p and min-p off leaves the logits as they are; node-llama-cpp
      // then takes the softmax of every token's logit
      const neutral = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1 };
      const out = await sequence.controlledEvaluate(
        tokens.map((id) => [id, { generateNext: { probabilities: true, options: neutral } }]));
      const probs = out.map((o) => {
        const p = new Float64Array(Math.max(...o.next.probabilities.keys()) + 1);
        for (const [id, prob] of o.next.probabilities) p[id] = prob;
        return p;
      });
      return { tokens, probs };
    } finally {
      await context.dispose();
    }
  } finally {
    await model.dispose();
  }
}

function compare(ours, theirs) {
  const r = { dp: 0, dlogp: 0, shape: 0, argmax: 0, compared: 0, positions: theirs.probs.length };
  // the last token: probabilities of ffn-trace's top tokens
  const p = theirs.probs[theirs.probs.length - 1];
  for (const x of ours.prediction) {
    r.dp = Math.max(r.dp, Math.abs(x.prob - p[x.id]));
    if (p[x.id] >= NORMAL_F32 && x.prob > 0) r.dlogp = Math.max(r.dlogp, Math.abs(Math.log(x.prob) - Math.log(p[x.id])));
  }
  r.ptop = ours.prediction[0].prob;
  // every token: log p_i - log p_top of the same tokens
  ours.lens.forEach((top, pos) => {
    const q = theirs.probs[pos];
    let best = 0;
    for (let i = 1; i < q.length; ++i) if (q[i] > q[best]) best = i;
    if (best !== top[0].id) r.argmax += 1;
    const ref = Math.log(q[top[0].id]);
    for (const x of top) {
      if (q[x.id] < NORMAL_F32) continue;
      r.shape = Math.max(r.shape, Math.abs((x.logit - top[0].logit) - (Math.log(q[x.id]) - ref)));
      r.compared += 1;
    }
  });
  return r;
}

const e = (x) => x.toExponential(1);

async function main() {
  const argv = process.argv.slice(2);
  const cut = argv.indexOf("--");
  const files = cut < 0 ? argv : argv.slice(0, cut);
  const prompts = cut < 0 || cut === argv.length - 1 ? defaultPrompts : argv.slice(cut + 1);
  if (files.length === 0) usage();

  const require = createRequire(path.join(path.resolve(modulesDir), "package.json"));
  const entry = require.resolve("node-llama-cpp");
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  // the package's own files, read beside its entry point (dist/index.js)
  const packageDir = path.dirname(path.dirname(entry));
  const readJson = (name) => JSON.parse(fs.readFileSync(path.join(packageDir, name), "utf8"));
  const version = readJson("package.json").version;
  const logs = [];
  // the prebuilt CPU binary only: no GPU, no build from source, nothing fetched
  const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true, progressLogs: false,
    logLevel: LlamaLogLevel.debug, logger: (level, message) => logs.push(message),
  });
  const release = readJson("llama/binariesGithubRelease.json").release;
  const backend = logs.find((l) => /loaded CPU backend/.test(l))?.trim() ?? "CPU backend: not logged";
  console.log(`# node-llama-cpp ${version}, llama.cpp ${llama.llamaCppRelease?.release ?? release} ` +
              `(gpu: ${llama.gpu}; ${backend})`);
  console.log(["file", "llama.cpp ran", "prompt", "tokens", "max |Δp| (last)", "max |Δlog p| (last)",
               "max |Δ(log p - log p_top)| (every token)", "log-probs compared", "argmax differs at", "P(top)"].join("\t"));

  for (const spec of files) {
    const [ours, theirsFile = ours] = spec.split("=");
    const runs = theirsFile === ours ? [theirsFile] : [theirsFile, ours];
    for (const prompt of prompts) {
      let t;
      try {
        t = ffnTraceRun(ours, prompt);
      } catch (err) {  // ffn-trace refused the file: its one-line error, and on to the next file
        console.log([path.basename(ours), "", JSON.stringify(prompt), `ffn-trace: ${String(err.stderr ?? err.message).trim()}`].join("\t"));
        break;
      }
      for (const their of runs) {
        const l = await llamaRun(llama, their, prompt);
        const label = their === ours ? (theirsFile === ours ? "the file" : "the file itself") : "its F32 copy";
        const shown = JSON.stringify(prompt);
        const same = JSON.stringify(l.tokens) === JSON.stringify(t.ids) && JSON.stringify(t.ids) === JSON.stringify(t.runIds);
        if (!same) {
          console.log([path.basename(ours), label, shown, `DIFFER: llama.cpp ${JSON.stringify(l.tokens)} ffn-trace ${JSON.stringify(t.ids)}`].join("\t"));
          continue;
        }
        const r = compare(t, l);
        console.log([path.basename(ours), label, shown, `same (${l.tokens.length})`, e(r.dp), e(r.dlogp), e(r.shape),
                     r.compared, r.argmax ? `${r.argmax} of ${r.positions}` : "none", r.ptop.toPrecision(3)].join("\t"));
      }
    }
  }
  await llama.dispose();
}

main().catch((err) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
