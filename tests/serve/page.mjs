// serve's page in a real browser: Debian's Chromium driven through the DevTools protocol by
// playwright-core. A user types "The capital of France is", clicks the unit that pushes the
// prediction most, knocks it out with the keyboard, and runs causal tracing; each time what the
// page shows is checked against the command line's JSON for the same question (run --layer all,
// run --layer all --ablate L:J, locate). Screenshots at 1280 and 360 px wide are left in WORK_DIR. Exit 77
// (skipped) without Chromium, as tests/browser/pages.sh.
//
//   node page.mjs NPM_DIR FFN_TRACE CHECKPOINT WORK_DIR
import { execFileSync, spawn } from "child_process";
import fs from "fs";
import { createRequire } from "module";
import path from "path";

const [npmDir, ffnTrace, checkpoint, work] = process.argv.slice(2);
const browser = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => fs.existsSync(p));
if (!browser) {
  console.log("skipped: no chromium (scripts/install-deps.sh ci installs it)");
  process.exit(77);
}
const require = createRequire(path.resolve(npmDir, "node_modules", "x.js"));
let chromium;
try {
  ({ chromium } = require("playwright-core"));
} catch {
  console.log(`error: no playwright-core under ${npmDir}/node_modules: run scripts/install-deps.sh`);
  process.exit(1);
}
fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });

const prompt = "The capital of France is";
const cli = (...args) => JSON.parse(execFileSync(ffnTrace, [args[0], "--checkpoint", checkpoint, ...args.slice(1), "--format", "json"],
  { encoding: "utf8", timeout: 120000 }));
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
};

// The edit takes a minute under the sanitizers: the time limit is raised for it.
const server = spawn(ffnTrace, ["serve", "--checkpoint", checkpoint, "--port", "0", "--time-limit", "600"], { stdio: ["ignore", "pipe", "inherit"] });
const watchdog = setTimeout(() => {
  console.log("FAIL: the test took more than 280 s");
  server.kill("SIGKILL");
  process.exit(1);
}, 280000);
const url = await new Promise((resolve, reject) => {
  let out = "";
  server.stdout.on("data", (d) => {
    out += d;
    const m = out.match(/^serving (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  server.on("exit", (code) => reject(new Error(`serve exited ${code} before it listened`)));
});

const b = await chromium.launch({ executablePath: browser, args: ["--no-sandbox", "--disable-gpu"], timeout: 60000 });
try {
  const page = await b.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(60000);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.goto(url);
  await page.fill("#prompt", "");
  await page.type("#prompt", prompt, { delay: 15 });  // as typed: the answers follow the keys, the last one wins
  await page.waitForFunction((n) => document.querySelector("#prompt-status").textContent.startsWith(`${n} tokens`), 5);
  const text = (sel) => page.textContent(sel);

  // The prediction, as `run --prompt TEXT --layer all --format json` gives it.
  const all = cli("run", "--prompt", prompt, "--layer", "all");
  const top = all.prediction.top[0];
  check(await text("#prediction-token") === top.token && await text("#prediction-prob") === `p = ${top.prob.toFixed(4)}`,
    `the prediction shown is the command's: ${JSON.stringify(top.token)} p = ${top.prob.toFixed(4)}`);
  const cell = all.lens_grid[1][all.layers.length - 1];
  check((await text("#lens tr:nth-child(3) td:last-child")).startsWith(`${cell.token} ${cell.prob.toFixed(4)}`),
    `the lens grid's cell for token 1 after the last layer is the command's (${JSON.stringify(cell.token)})`);

  // The unit that pushes the prediction most, of any layer, clicked; then knocked out from the keyboard.
  const best = all.layers.map((l) => ({ layer: l.layer, ...l.units[0] })).reduce((a, u) => (u.score > a.score ? u : a));
  await page.click(`#units button[data-layer="${best.layer}"][data-unit="${best.unit}"]`);
  await page.waitForSelector("#unit-card .card");
  const card = cli("units", "--layer", String(best.layer), "--unit", String(best.unit), "--top", "5").units[0];
  check((await text("#unit-card")).includes(`max ${card.max.toFixed(4)}`), `unit ${best.unit} of layer ${best.layer}: its page's max is the command's`);
  check(await page.evaluate(() => document.activeElement.id) === "knock-out", "the knock-out button has the focus after the click");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector("#change-status").textContent.includes("→"));
  const knocked = cli("run", "--prompt", prompt, "--layer", "all", "--ablate", `${best.layer}:${best.unit}`, "--top", "8");
  const after = knocked.prediction.top[0];
  const target = knocked.changes.find((c) => c.id === top.id);
  check(await text("#prediction-token") === after.token && await text("#prediction-prob") === `p = ${after.prob.toFixed(4)}`,
    `knocked out, the prediction shown is run --ablate's: ${JSON.stringify(after.token)} p = ${after.prob.toFixed(4)}`);
  check((await text("#change-status")).includes(`${target.before.toFixed(4)} → ${target.after.toFixed(4)}`),
    `the change is stated: p(${JSON.stringify(top.token)}) ${target.before.toFixed(4)} → ${target.after.toFixed(4)}`);
  // The lens moves with it: the last cell the knock-out changed shows run --layer all --ablate's value.
  let moved = null;
  knocked.lens_grid.forEach((row, t) => row.forEach((c, l) => { if (Math.abs(c.prob - all.lens_grid[t][l].prob) > 1e-6) moved = { t, l, c }; }));
  const movedText = moved && await text(`#lens tr:nth-child(${moved.t + 2}) td:nth-child(${moved.l + 2})`);
  check(moved && movedText.startsWith(`${moved.c.token} ${moved.c.prob.toFixed(4)}`),
    moved ? `the lens cell of token ${moved.t} after layer ${moved.l} moved to the command's: ${JSON.stringify(moved.c.token)} ` +
      `${moved.c.prob.toFixed(4)} (was ${all.lens_grid[moved.t][moved.l].prob.toFixed(4)}); shown ${JSON.stringify(movedText)}`
      : "the knock-out moved some cell of the lens");

  // Causal tracing: the grid's strongest cell is locate's.
  await page.fill("#subject", "France");
  await page.fill("#samples", "10");
  await page.press("#samples", "Enter");  // the keyboard's way to run it
  await page.waitForFunction(() => document.querySelector("#trace-status").textContent.includes("Strongest"));
  const located = cli("locate", "--prompt", prompt, "--subject", "France", "--samples", "10");
  const grid = located.grids.state.value;
  let hit = [0, 0];
  grid.forEach((row, l) => row.forEach((v, t) => { if (v > grid[hit[0]][hit[1]]) hit = [l, t]; }));
  const shown = await page.$eval("#trace-state td.hit", (td) => [Number(td.dataset.layer), Number(td.dataset.token), td.textContent]);
  check(shown[0] === hit[0] && shown[1] === hit[1] && shown[2] === grid[hit[0]][hit[1]].toFixed(3),
    `the trace's strongest cell is locate's: layer ${hit[0]}, token ${hit[1]}, ${grid[hit[0]][hit[1]].toFixed(3)}`);

  // The edit, kept for this page: the prediction becomes the edited model's, then the undo restores it.
  await page.click(`#changes button`);  // the knock-out undone first
  await page.waitForFunction((p) => document.querySelector("#prediction-prob").textContent === p, `p = ${top.prob.toFixed(4)}`);
  await page.fill("#edit-layer", "0");
  await page.selectOption("#edit-at", "last");
  await page.click("#edit");
  await page.waitForSelector("#edited button", { timeout: 250000 });
  await page.waitForFunction(() => document.querySelector("#prediction-token").textContent === " Rome");
  check((await text("#edited")).startsWith('edited: France → " Rome" at layer 0'), `the kept edit is stated: ${await text("#edited")}`);
  await page.click("#edited button");
  await page.waitForFunction((t) => document.querySelector("#prediction-token").textContent === t, top.token);
  check(await text("#prediction-prob") === `p = ${top.prob.toFixed(4)}` && await text("#edited") === "",
    "after the undo the prediction is the model's given at start again");

  await page.screenshot({ path: path.join(work, "serve.png"), fullPage: true });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(work, "serve_top.png") });  // docs/serve.png
  await page.setViewportSize({ width: 360, height: 800 });
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  const widest = await page.evaluate(() => [...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > 361)
    .map((e) => e.tagName + (e.id ? "#" + e.id : "")).slice(0, 5).join(", "));
  check(wide <= 360, `at 360 px the page does not scroll sideways (${wide} px wide${widest ? ": " + widest : ""})`);
  await page.screenshot({ path: path.join(work, "serve_360.png"), fullPage: true });
  check(errors.length === 0, `no script errors${errors.length ? ": " + errors.join("; ") : ""}`);
} finally {
  await b.close();
  server.kill("SIGINT");
  clearTimeout(watchdog);
}
console.log(failures ? `${failures} failed` : "all passed");
process.exit(failures ? 1 : 0);
