// ffn-trace serve's page: asks the server's JSON API (the commands' own JSON) and draws what it answers.
// Nothing is computed here but the layout: every number shown is one the API sent.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { model: 0, answer: null, layer: null, unit: null, changes: [], asked: 0, session: null, edited: {} };

// An element with attributes and children (strings become text: nothing the server sends is read as markup).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c);
  return e;
}
const tok = (text) => el('span', { class: 'tok' }, JSON.stringify(text).slice(1, -1));
const p4 = (x) => x.toFixed(4);
const signed = (x) => (x < 0 ? '−' : '+') + Math.abs(x).toFixed(4);
function bar(fraction, kind) {
  return el('span', { class: 'bar ' + (kind || ''), style: `width:${Math.min(10, Math.abs(fraction) * 10).toFixed(2)}em` });
}

// Every request names the page's session: an edit kept is the session's, read by its later requests.
async function api(path, body) {
  if (body !== undefined && state.session) body = { ...body, session: state.session };
  const r = await fetch(path, body === undefined ? {} : {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  const answer = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  if (!r.ok) throw new Error(answer.error || `HTTP ${r.status}`);
  return answer;
}

function say(id, text, isError) {
  const s = $(id);
  s.textContent = text;
  s.classList.toggle('error', !!isError);
}

// --- the prompt's answer: `run --prompt TEXT --layer all --format json` ---

let typing = null;
function promptChanged() {
  clearTimeout(typing);
  typing = setTimeout(ask, 250);
}

async function ask() {
  const asked = ++state.asked;
  const prompt = $('prompt').value;
  if (!prompt) { say('prompt-status', 'Type a prompt.'); return; }
  say('prompt-status', 'Running…');
  try {
    const answer = await api('/api/prompt', { model: state.model, prompt, top: 8 });
    if (asked !== state.asked) return;  // a later keystroke asked again
    state.answer = answer;
    say('prompt-status', `${answer.prompt.token_ids.length} tokens through ${answer.n_layers} layers (${answer.arch}).`);
    drawAnswer(answer);
    if (state.changes.length) await runChanges();
  } catch (e) {
    if (asked === state.asked) say('prompt-status', e.message, true);
  }
}

function drawAnswer(a) {
  $('tokens').replaceChildren(...a.prompt.display.map((t, i) => el('li', {}, el('small', {}, `${i} `), JSON.stringify(t).slice(1, -1))));
  drawPrediction(a.prediction.top);
  drawLens(a);
  drawPush(a);
  drawUnits(a);
}

function drawPrediction(top, before) {
  $('prediction-token').textContent = JSON.stringify(top[0].token).slice(1, -1);
  $('prediction-prob').textContent = `p = ${p4(top[0].prob)}`;
  const rows = top.map((t) => {
    const was = before && before.find((b) => b.id === t.id);
    return el('tr', {}, el('td', {}, tok(t.token)), el('td', { class: 'num' }, p4(t.prob)),
      el('td', { class: 'num' }, was ? `was ${p4(was.prob)}` : ''), el('td', {}, bar(t.prob)));
  });
  $('top-tokens').replaceChildren($('top-tokens').caption || el('caption', {}, 'Top tokens'), ...rows);
}

function drawLens(a) {
  const head = el('tr', {}, el('th', {}, 'token'), ...a.layers.map((l) => el('th', {}, `layer ${l.layer}`)));
  const rows = a.lens_grid.map((row, t) => el('tr', {}, el('th', {}, tok(a.prompt.display[t])),
    ...row.map((cell) => el('td', { style: `background:rgba(6,69,173,${(cell.prob * 0.45).toFixed(3)})`, title: `logit ${cell.logit.toFixed(4)}` },
      JSON.stringify(cell.token).slice(1, -1), ' ', p4(cell.prob)))));
  $('lens').replaceChildren(head, ...rows);
}

function drawPush(a) {
  const most = Math.max(1e-12, ...a.layers.map((l) => Math.abs(l.push)));
  const head = el('tr', {}, el('th', {}, 'layer'), el('th', {}, 'push on logit'), el('th', {}, ''),
    el('th', {}, `p(${JSON.stringify(a.target.token)}) before → after the FFN`));
  const rows = a.layers.map((l) => el('tr', {}, el('td', {}, String(l.layer)), el('td', { class: 'num' }, signed(l.push)),
    el('td', {}, bar(l.push / most, l.push < 0 ? 'down' : 'up')),
    el('td', { class: 'num' }, `${p4(l.target_before.prob)} → ${p4(l.target_after.prob)}`)));
  $('push').replaceChildren(head, ...rows);
}

function unitButton(layer, u) {
  const pressed = state.layer === layer && state.unit === u.unit;
  return el('button', {
    type: 'button', 'data-layer': layer, 'data-unit': u.unit, 'aria-pressed': String(pressed),
    onclick: () => chooseUnit(layer, u.unit),
  }, el('span', {}, `unit ${u.unit}`), el('span', { class: u.score < 0 ? 'down' : 'up' }, signed(u.score)));
}

function drawUnits(a) {
  $('units').replaceChildren(...a.layers.slice().reverse().map((l) => el('div', {},
    el('h3', {}, `layer ${l.layer}`), ...l.units.map((u) => unitButton(l.layer, u)), ...l.against.map((u) => unitButton(l.layer, u)))));
}

// --- one unit: `units --layer N --unit J --format json`, and changes to units of any layer: `run --layer all --ablate L:J --intervene L:J*F` ---

async function chooseUnit(layer, unit) {
  state.layer = layer;
  state.unit = unit;
  $('unit-section').hidden = false;
  $('unit-name').textContent = `${unit} of layer ${layer}`;
  drawUnits(state.answer);
  drawChanges();
  $('unit-card').replaceChildren(el('p', { class: 'quiet' }, 'Reading the corpus…'));
  try {
    const u = await api('/api/unit', { model: state.model, layer, unit: String(unit), top: 5 });
    if (state.unit === unit && state.layer === layer) $('unit-card').replaceChildren(unitCard(u, layer, unit));
  } catch (e) {
    $('unit-card').replaceChildren(el('p', { class: 'status error' }, e.message));
  }
  $('knock-out').focus();
}

function unitCard(page, layer, unit) {
  const u = page.units[0];
  const here = state.answer && [...state.answer.layers[layer].units, ...state.answer.layers[layer].against].find((x) => x.unit === unit);
  const contexts = u.max_activating.map((c) => el('p', { class: 'context' },
    c.tokens.map((t, i) => (c.first + i === c.token ? el('mark', {}, t) : t)), `  (${p4(c.activation)})`));
  const tokens = (list) => el('p', {}, ...list.map((t) => [tok(t.token), ` ${signed(t.score)}  `]));
  return el('div', { class: 'card' },
    here ? el('p', {}, `On this prompt, at the last token: activation ${p4(here.activation)}, push ${signed(here.score)} on the logit.`) : null,
    el('p', {}, `Over the corpus (${page.corpus.tokens} tokens): max ${p4(u.max)}, mean ${p4(u.mean)}, active at ${(100 * u.fraction_active).toFixed(1)}% of tokens.`),
    el('h3', {}, 'Where it fires most'), ...contexts,
    el('h3', {}, 'Its value vector promotes'), tokens(u.promotes),
    el('h3', {}, 'and suppresses'), tokens(u.suppresses));
}

function change(kind) {
  const value = kind === 'scale' ? Number($('scale-value').value) : kind === 'set' ? Number($('set-value').value) : 0;
  if (!Number.isFinite(value)) return say('change-status', 'Give a number.', true);
  state.changes = state.changes.filter((c) => c.layer !== state.layer || c.unit !== state.unit)
    .concat([{ layer: state.layer, unit: state.unit, kind, value }]);
  drawChanges();
  runChanges();
}

const changeText = (c) => `layer ${c.layer} unit ${c.unit}` + (c.kind === 'zero' ? ' knocked out' : c.kind === 'scale' ? ` × ${c.value}` : ` = ${c.value}`);

function drawChanges() {
  $('changes').replaceChildren(...state.changes.map((c) => el('li', {}, el('button', {
    type: 'button', title: 'Undo this change', onclick: () => { state.changes = state.changes.filter((x) => x !== c); drawChanges(); runChanges(); },
  }, `${changeText(c)} ✕`))));
}

async function runChanges() {
  const a = state.answer;
  if (!a) return;
  $('lens-note').hidden = !state.changes.length;
  if (!state.changes.length) {
    drawPrediction(a.prediction.top);
    drawLens(a);
    drawPush(a);
    say('change-status', '');
    return;
  }
  const asked = state.asked;
  const body = {
    model: state.model, prompt: a.prompt.text, top: 8,
    ablate: state.changes.filter((c) => c.kind === 'zero').map((c) => `${c.layer}:${c.unit}`),
    intervene: state.changes.filter((c) => c.kind !== 'zero').map((c) => `${c.layer}:${c.unit}${c.kind === 'scale' ? '*' : '='}${c.value}`),
  };
  say('change-status', 'Running with the changes…');
  try {
    const r = await api('/api/run', body);
    if (asked !== state.asked) return;
    const before = r.baseline_prediction.top, after = r.prediction.top;
    drawPrediction(after, before);
    drawLens(r);
    drawPush(r);
    const target = r.changes.find((c) => c.id === before[0].id);
    const now = after[0].id === before[0].id ? `the prediction stays ${JSON.stringify(after[0].token)}`
      : `the prediction is now ${JSON.stringify(after[0].token)} (p = ${p4(after[0].prob)})`;
    say('change-status', `${state.changes.map(changeText).join(', ')}: p(${JSON.stringify(before[0].token)}) ` +
      `${p4(target.before)} → ${p4(target.after)}; ${now}.`);
  } catch (e) {
    say('change-status', e.message, true);
  }
}

// --- causal tracing: `locate --prompt TEXT --subject TEXT --samples S --format json` ---

async function trace() {
  const a = state.answer;
  if (!a) return;
  say('trace-status', 'Tracing…');
  try {
    const t = await api('/api/locate', { model: state.model, prompt: a.prompt.text, subject: $('subject').value, samples: Number($('samples').value) });
    const titles = { state: 'The stream restored', mlp: 'The FFN output restored', attn: 'The attention output restored' };
    let best = null;
    const grids = Object.entries(t.grids).map(([kind, g]) => {
      const value = g.value;  // (layers, tokens)
      let hit = [0, 0];
      value.forEach((row, l) => row.forEach((v, i) => { if (v > value[hit[0]][hit[1]]) hit = [l, i]; }));
      if (kind === 'state') best = { layer: hit[0], token: hit[1], value: value[hit[0]][hit[1]] };
      const lo = t.corrupted_value, hi = Math.max(t.clean_value, lo + 1e-12);
      const head = el('tr', {}, el('th', {}, 'token'), ...value.map((_, l) => el('th', {}, `L${l}`)));
      const rows = t.prompt.tokens.map((name, i) => el('tr', {}, el('th', {}, tok(name), t.subject.positions.includes(i) ? ' *' : ''),
        ...value.map((row, l) => el('td', {
          class: l === hit[0] && i === hit[1] ? 'hit' : '', 'data-layer': l, 'data-token': i,
          style: `background:rgba(179,38,30,${Math.max(0, Math.min(1, (row[i] - lo) / (hi - lo))) * 0.6})`,
        }, row[i].toFixed(3)))));
      return el('div', { id: `trace-${kind}` }, el('div', { class: 'scroll' }, el('table', { class: 'grid' },
        el('caption', {}, `${titles[kind] || kind}: ${t.metric} of ${JSON.stringify(t.target.token)}`), head, ...rows)));
    });
    $('trace-grids').replaceChildren(...grids);
    say('trace-status', `Clean p = ${p4(t.clean_prob)}, subject noised p = ${p4(t.corrupted_prob)}. Strongest restore of the stream: ` +
      `layer ${best.layer} at token ${best.token} ${JSON.stringify(t.prompt.tokens[best.token])}, ${t.metric} ${best.value.toFixed(4)}.`);
  } catch (e) {
    say('trace-status', e.message, true);
  }
}

// --- the edit: `edit --prompt TEXT --subject TEXT --target TOKEN [--layer N] --format json`, in memory ---

function factsTable(title, facts) {
  if (!facts.length) return null;
  const head = el('tr', {}, el('th', {}, 'prompt'), el('th', {}, 'before'), el('th', {}, 'after'), el('th', {}, 'changed'));
  const rows = facts.map((f) => el('tr', {}, el('td', {}, f.text), el('td', {}, tok(f.before.token), ` ${p4(f.before.prob)}`),
    el('td', {}, tok(f.after.token), ` ${p4(f.after.prob)}`), el('td', {}, f.changed ? 'yes' : 'no')));
  return el('div', { class: 'scroll' }, el('table', {}, el('caption', {}, title), head, ...rows));
}

async function edit() {
  const a = state.answer;
  if (!a) return;
  say('edit-status', 'Editing…');
  const body = { model: state.model, prompt: a.prompt.text, subject: $('subject').value, target: $('target').value, at: $('edit-at').value, keep: true };
  if ($('edit-layer').value !== '') body.layer = Number($('edit-layer').value);
  try {
    const t = await api('/api/edit', body);
    const e = t.efficacy, s = t.summary;
    const chosen = t.edit.layer_choice ? ` (chosen by tracing: the FFN's effect ${p4(t.edit.layer_choice.effect)} at token ${t.edit.layer_choice.token})` : '';
    say('edit-status', `Layer ${t.edit.layer}${chosen}: p(${JSON.stringify(e.new)}) ${p4(e.before.p_new)} → ${p4(e.after.p_new)}, ` +
      `p(${JSON.stringify(e.true)}) ${p4(e.before.p_true)} → ${p4(e.after.p_true)}; ` +
      (t.taken ? 'the edit took.' : `the edit did not take (${JSON.stringify(e.after.token)} still first).`));
    const score = (name, x) => el('li', {}, `${name}: ${p4(x.before.score)} → ${p4(x.score)} (${x.count} prompts)`);
    $('edit-result').replaceChildren(
      el('ul', {}, score('efficacy', s.efficacy), score('paraphrases', s.paraphrase), score('neighbours (should stay)', s.neighbour),
        score('the subject\'s other facts (should stay)', s.subject)),
      factsTable('Paraphrases', t.paraphrases), factsTable('Neighbours', t.neighbours), factsTable('The subject\'s other facts', t.subject_facts));
    state.edited[state.model] = `${t.subject.text} → ${JSON.stringify(e.new)} at layer ${t.edit.layer}`;
    drawEdited();
    ask();  // the prompt's answer is now the edited model's
  } catch (e) {
    say('edit-status', e.message, true);
  }
}

// The edit kept for this page's session, with its undo.
function drawEdited() {
  const text = state.edited[state.model];
  $('edited').replaceChildren(...(text ? [el('li', {}, el('button', {
    type: 'button', title: 'Undo the edit', onclick: undoEdit,
  }, `edited: ${text} ✕`))] : []));
}

async function undoEdit() {
  try {
    await api('/api/undo', { model: state.model });
    delete state.edited[state.model];
    drawEdited();
    say('edit-status', 'The edit is undone: the model is the one given at start.');
    ask();
  } catch (e) {
    say('edit-status', e.message, true);
  }
}

async function start() {
  try {
    const { models } = await api('/api/models');
    state.session = (await api('/api/session', {})).session;
    // The session's edits end with the page.
    addEventListener('pagehide', () => navigator.sendBeacon('/api/session/end', new Blob([JSON.stringify({ session: state.session })], { type: 'application/json' })));
    $('model').replaceChildren(...models.map((m) => el('option', { value: m.index }, `${m.name} (${m.layers} layers)`)));
  } catch (e) {
    say('prompt-status', e.message, true);
    return;
  }
  $('model').addEventListener('change', () => { state.model = Number($('model').value); state.changes = []; state.unit = null; $('unit-section').hidden = true; drawEdited(); ask(); });
  $('prompt').addEventListener('input', promptChanged);
  $('knock-out').addEventListener('click', () => change('zero'));
  $('scale').addEventListener('click', () => change('scale'));
  $('set').addEventListener('click', () => change('set'));
  $('trace').addEventListener('click', trace);
  $('edit').addEventListener('click', edit);
  // Enter in a field runs its section's action, as a form's submit would.
  const onEnter = (ids, action) => ids.forEach((id) => $(id).addEventListener('keydown', (e) => { if (e.key === 'Enter') action(); }));
  onEnter(['subject', 'samples'], trace);
  onEnter(['target', 'edit-layer'], edit);
  onEnter(['scale-value'], () => change('scale'));
  onEnter(['set-value'], () => change('set'));
  ask();
}

start();
