// Forward page: one query token's forward pass through the model, every number the server read from the model's
// own modules: its pixels, the projection, the position, the block's input, q, every k and v, the scores, the
// weights at temperature T, Σ wᵢvᵢ, the block output and the prediction. A head or the block's attention can be
// knocked out (the server re-runs the model with it zeroed) and T re-runs the head at that temperature: the
// prediction moves with them. A key is linked across the scores, the weights, K, V and the image.
import { $, announce, decode, getJSON, latest, modelLabels, offerTraining, startingModel, setState } from "./api.js";
import { logControl } from "./controls.js";
import { cursor, gridHit, link } from "./cursor.js";
import { colourBar, describe, drawBars, drawOverlay, makeCanvas, paintGrid, paintHeat, paintHighlight, paintImage,
  paintNumbers, paintOutline, surface } from "./draw.js";
import { prob, signed } from "./format.js";
import { onImage, picker } from "./picker.js";
import { remember, setting } from "./state.js";
import { numbersTable } from "./table.js";

const page = $("page-forward");
const run = latest(page, $("forward-error"));
const key = link();                     // the key under the pointer or keyboard (prefix tokens first)
const state = { models: [], model: null, query: null, knockout: "none", result: null, image: null, imageRef: null,
  box: null, matrices: [] };
let temperature = null;

const vector = (encoded) => decode(encoded).data;
const reach = (...ranges) => Math.max(1e-12, ...ranges.flatMap((r) => r.map(Math.abs)));

function keyName(k) {
  const r = state.result;
  if (!r) return `key ${k}`;
  if (k < r.prefix) return k === 0 && state.models[state.model].class_token ? "the class token" : `prefix token ${k}`;
  const p = k - r.prefix, gw = r.grid[1];
  return `patch ${p} (row ${Math.floor(p / gw)}, column ${p % gw})`;
}

// The figure kept for `slot` (made once, redrawn in place on every answer: no new elements, no new layout).
const slots = new Map();
function figureFor(slot, className, width, height) {
  if (!slots.has(slot)) {
    const figure = document.createElement("figure");
    figure.className = className;
    const caption = document.createElement("figcaption");
    const canvas = makeCanvas(width, height);
    canvas.classList.add("fluid");
    figure.append(caption, canvas);
    slots.set(slot, { figure, caption, canvas });
  }
  return slots.get(slot);
}

// A vector as one row of coloured cells on `scale`, captioned with its name and range.
function strip(slot, title, encoded, scale, words) {
  const values = vector(encoded);
  const { figure, caption, canvas } = figureFor(slot, "strip heatmap", 352, 22);
  caption.textContent = `${title} (${values.length}): ${signed(encoded.range[0])} … ${signed(encoded.range[1])}`;
  const s = surface(canvas);
  paintHeat(s, values, 1, values.length, scale, { box: { x: 0, y: 0, w: s.w, h: s.h } });
  describe(canvas, `${words || title}: ${values.length} values from ${signed(encoded.range[0])} to ` +
    `${signed(encoded.range[1])}`);
  return figure;
}

// A matrix (rows x cols) on `scale`, captioned; rows are keys when `keyed` (linked to the key under the pointer).
function matrixFigure(slot, title, encoded, scale, { keyed = false, words = title } = {}) {
  const m = decode(encoded);
  const [rows, cols] = m.shape;
  const height = Math.max(60, Math.min(240, rows * 10)), width = Math.max(60, Math.min(352, cols * 12));
  const kept = figureFor(`${slot}:${rows}x${cols}`, "matrix heatmap", width, height);
  const { figure, caption, canvas } = kept;
  caption.textContent = `${title} (${rows} × ${cols})`;
  const s = surface(canvas);
  canvas.box = { x: 0, y: 0, w: s.w, h: s.h };
  paintHeat(s, m.data, rows, cols, scale, { box: canvas.box });
  if (keyed) {
    canvas.rows = rows;
    state.matrices.push(canvas);
    kept.cursor = kept.cursor || cursor(canvas, { label: `${words}, one row per key`,
      describe: (k) => `row ${k}: ${keyName(k)}`, onMove: key.set });
    kept.cursor.layout(rows, 1, (x, y) => (y < 0 || y >= s.h ? -1 : Math.floor((y / s.h) * rows)));
  } else {
    describe(canvas, `${words}: ${rows} × ${cols} values from ${signed(encoded.range[0])} to ${signed(encoded.range[1])}`);
  }
  return figure;
}

// Row `id` holding `figures` and, last, a colour bar of `scale`; its elements are replaced only when they change.
function row(id, figures, scale, label) {
  const box = $(id);
  if (!box.scaleBar) {
    box.scaleBar = document.createElement("div");
    box.scaleBar.className = "colourbar";
  }
  const wanted = scale ? [...figures, box.scaleBar] : figures;
  if (wanted.length !== box.children.length || wanted.some((node, i) => box.children[i] !== node)) {
    box.replaceChildren(...wanted);
  }
  if (scale) colourBar(box.scaleBar, scale, label, signed);
}

function drawEmbedding(r) {
  const e = r.embedding;
  const scale = { lo: -1, hi: 1, map: "diverging" };
  const d = reach(...[e.embedded, e.position, e.positioned, ...e.prefix].filter(Boolean).map((v) => v.range));
  const dscale = { lo: -d, hi: d, map: "diverging" };
  const figures = [];
  if (e.normalised) {
    const x = reach(e.normalised.range);
    figures.push(strip("x", "the patch's pixels, normalised: x", e.normalised, { ...scale, lo: -x, hi: x },
      "the patch's normalised pixels x"));
    const w = reach(e.weight.range);
    const transposed = transpose(e.weight);
    figures.push(matrixFigure("W", "the projection Wᵀ: P²C inputs × D outputs", transposed, { lo: -w, hi: w, map: "diverging" },
      { words: "the projection's weights" }));
  }
  if (e.embedded) {
    figures.push(strip("e", "embedding e = W x + b", e.embedded, dscale));
    const position = state.models[state.model].pos_embed;
    figures.push(strip("p", `position p (${position})`, e.position, dscale));
    figures.push(strip("e+p", "the token e + p", e.positioned, dscale));
  }
  e.prefix.forEach((token, i) => figures.push(strip(`prefix ${i}`, i === 0 && state.models[state.model].class_token
    ? "the class token, prepended (learned, not projected)" : `prefix token ${i}, prepended`, token, dscale)));
  row("fwd-embedding", figures, dscale, "value in a D-wide vector (the strips e, p and e + p share it)");
}

// encoded (D, P²C) as (P²C, D): a reshape for drawing, the numbers the server's.
function transpose(encoded) {
  const m = decode(encoded);
  const [rows, cols] = m.shape;
  const out = new Float32Array(rows * cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j * rows + i] = m.data[i * cols + j];
  const bytes = new Uint8Array(out.buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
  return { shape: [cols, rows], data: btoa(binary), range: encoded.range };
}

function drawBlock(r) {
  const name = `block ${r.layer}`;
  $("fwd-block-title").textContent = `2. Into ${name}, head ${r.head} (d_k = ${r.head_dim})`;
  const d = reach(r.block_input.range, r.normed.range);
  const dscale = { lo: -d, hi: d, map: "diverging" };
  row("fwd-block-in", [strip("x_l", `the token entering ${name}: x`, r.block_input, dscale),
    strip("ln", "LayerNorm(x), what attention reads", r.normed, dscale)], dscale, "value (x and LayerNorm(x) share it)");
  const k = reach(r.q.range, r.k.range, r.v.range);
  const kscale = { lo: -k, hi: k, map: "diverging" };
  state.matrices = [];
  row("fwd-keys", [strip("q", `its query q (head ${r.head})`, r.q, kscale),
    matrixFigure("K", "every key K", r.k, kscale, { keyed: true, words: "the keys K" }),
    matrixFigure("V", "every value V", r.v, kscale, { keyed: true, words: "the values V" })], kscale,
  "value in q, K and V (one scale)");
}

function drawScores(r) {
  const labels = Array.from({ length: r.keys }, (_, k) => (k < r.prefix ? "cls" : String(k - r.prefix)));
  const scores = Array.from(vector(r.scores)), weights = Array.from(vector(r.weights));
  const selected = r.token, highlight = key.get() ?? -1;
  const gs = drawBars($("fwd-scores"), scores, { labels, selected, highlight });
  const gw = drawBars($("fwd-weights"), weights, { labels, selected, highlight, line: r.uniform,
    lineLabel: `uniform 1/N = ${prob(r.uniform)}` });
  $("fwd-scores").dataset.values = JSON.stringify(scores);
  $("fwd-weights").dataset.values = JSON.stringify(weights);
  $("fwd-scores").dataset.highlight = $("fwd-weights").dataset.highlight = highlight >= 0 ? highlight : "";
  for (const [id, g] of [["fwd-scores", gs], ["fwd-weights", gw]]) {
    barCursors[id].layout(r.keys, 1, (x) => (x < g.left ? -1 : Math.min(r.keys - 1, Math.floor((x - g.left) / g.step))),
      barCursors[id].at);
  }
  const at = r.temperature === 1 ? "" : ` at T = ${r.temperature}`;
  $("fwd-scores-caption").textContent = `scores of ${keyName(r.token)} against the ${r.keys} keys`;
  $("fwd-weights-caption").textContent = `weights softmax(scores / T)${at}; they sum to 1 (axis 0 to ` +
    `${prob(Math.max(...weights.filter(Number.isFinite), r.uniform))}, the largest)`;
  $("fwd-scale").textContent = `Scores: ${r.scale}. ${r.temperature === 1 ? "" : `Weights at T = ${r.temperature} ` +
    "(the head's own softmax divided by T; the model is re-run with it)."}`;
}

function drawNumbers(r) {
  const scores = vector(r.scores), weights = vector(r.weights), trained = vector(r.model_weights);
  numbersTable($("fwd-table"), `block ${r.layer}, head ${r.head}, query ${keyName(r.token)}`,
    ["key", "score", r.temperature === 1 ? "weight" : `weight at T = ${r.temperature}`, "weight as trained"],
    Array.from(scores, (s, k) => [keyName(k), Number.isFinite(s) ? signed(s) : "masked", prob(weights[k]),
      prob(trained[k])]));
}

function drawOut(r) {
  const d = reach(r.attention_output.range, r.block_output.range, ...(r.residual ? [r.residual.range] : []));
  const dscale = { lo: -d, hi: d, map: "diverging" };
  const h = reach(r.head_output.range);
  const gone = r.knockout === "head" ? " (knocked out: 0)" : "";
  const figures = [strip("wv", `Σ wᵢvᵢ, head ${r.head}${gone}`, r.head_output, { lo: -h, hi: h, map: "diverging" },
    `the head's output, the weights times the values`)];
  figures.push(strip("attn", `attention output: every head, projected${r.knockout === "layer" ? " (knocked out: 0)" : ""}`,
    r.attention_output, dscale));
  if (r.residual) figures.push(strip("res", "x + attention (the residual stream)", r.residual, dscale));
  figures.push(strip("out", `${r.layer + 1 < state.models[state.model].depth ? "block output, into the next block"
    : "block output, into the final norm and the head"}`, r.block_output, dscale));
  row("fwd-block-out", figures, dscale, "value in a D-wide vector (the last three share it)");
}

// Every class's probability, as trained and as now run, with the true label judged.
function drawPrediction(r) {
  const box = $("fwd-prediction");
  box.replaceChildren();
  const changed = r.knockout !== "none" || r.temperature !== 1;
  const top = document.createElement("div");
  top.className = "top";
  top.textContent = `${r.prediction.class} (probability ${prob(r.prediction.confidence)})`;
  const judged = document.createElement("div");
  judged.className = "truth";
  const t = r.truth;
  if (t.correct !== null) {
    judged.classList.add(t.correct ? "right" : "wrong");
    judged.textContent = `${t.correct ? "✓ right" : "✗ wrong"}: the true label is ${t.label}`;
  } else {
    judged.textContent = t.label !== null ? `true label ${t.label} (${t.note})` : `no true label: ${t.note}`;
  }
  box.dataset.predicted = r.prediction.class;
  box.dataset.probabilities = JSON.stringify(r.prediction.probabilities);   // the numbers drawn, for checking
  box.append(top, judged);
  const classes = state.models[state.model].classes;
  classes.forEach((name, c) => {
    const bar = document.createElement("div");
    bar.className = "bar";
    const fill = document.createElement("span");
    fill.style.width = `${100 * r.prediction.probabilities[c]}%`;
    const text = document.createElement("b");
    const was = r.original.probabilities[c];
    text.textContent = `${name}: ${prob(r.prediction.probabilities[c])}${changed ? ` (as trained ${prob(was)})` : ""}`;
    bar.append(fill, text);
    box.append(bar);
  });
  $("fwd-prediction-caption").textContent = changed ? "prediction of the changed model" : "prediction";
  const what = r.knockout === "head" ? `head ${r.head} of block ${r.layer} knocked out`
    : r.knockout === "layer" ? `block ${r.layer}'s attention knocked out` : "";
  const hot = r.temperature !== 1 ? `head ${r.head} of block ${r.layer} at temperature ${r.temperature}` : "";
  $("fwd-change").textContent = changed ? `Re-run with ${[what, hot].filter(Boolean).join(" and ")}: as trained it ` +
    `predicts ${r.original.class} (${prob(r.original.confidence)}), now ${r.prediction.class} ` +
    `(${prob(r.prediction.confidence)}).` : "The model as trained: nothing changed.";
}

function drawImage() {
  const r = state.result;
  const [gh, gw] = r.grid;
  const s = surface($("fwd-image"));
  state.box = paintImage(s, state.image);
  paintGrid(s, state.box, gh, gw);
  paintNumbers(s, state.box, gh, gw);
  const patch = r.embedding.patch;
  if (patch !== null) paintOutline(s, state.box, gh, gw, patch);
  imageCursor.layout(gh * gw, gw, gridHit(state.box, gh, gw), patch ?? 0);
  $("fwd-image-caption").textContent = `the image as the model reads it; query: ${keyName(r.token)}`;
}

function draw(r) {
  state.result = r;
  if (r.image) { state.image = decode(r.image); state.imageRef = `${r.model}|${r.ref}`; }
  drawImage();
  drawPrediction(r);
  drawEmbedding(r);
  drawBlock(r);
  drawNumbers(r);
  drawOut(r);
  light(key.get());          // draws the scores and the weights, the key under the pointer lit
  announce(`${keyName(r.token)}, block ${r.layer}, head ${r.head}: predicted ${r.prediction.class} with ` +
    `probability ${prob(r.prediction.confidence)}`);
}

// Key `k` lit among the scores and the weights, in K and V, and on the image (null: none).
function light(k) {
  const r = state.result;
  if (!r) return;
  const [gh, gw] = r.grid;
  const patch = k !== null && k >= r.prefix ? k - r.prefix : null;
  drawOverlay($("fwd-image"), (s) => paintHighlight(s, state.box, gh, gw, patch));
  $("fwd-image").dataset.highlight = patch ?? "";
  for (const canvas of state.matrices) {
    drawOverlay(canvas, (s) => paintHighlight(s, canvas.box, canvas.rows, 1, k));
    canvas.dataset.highlight = k ?? "";
  }
  drawScores(r);
}

const imageCursor = cursor($("fwd-image"), {
  label: "query patch (Enter makes it the query)",
  describe: (p) => keyName((state.result?.prefix ?? 0) + p),
  onMove: (p) => key.set(p === null ? null : (state.result?.prefix ?? 0) + p),
  onPick: (p) => { state.query = p; refresh(); },
});
const barCursors = Object.fromEntries(["fwd-scores", "fwd-weights"].map((id) => [id, cursor($(id), {
  label: id === "fwd-scores" ? "the score of each key" : "the weight of each key",
  describe: (k) => {
    const r = state.result;
    if (!r) return `key ${k}`;
    return `${keyName(k)}: score ${signed(vector(r.scores)[k])}, weight ${prob(vector(r.weights)[k])}`;
  },
  onMove: key.set,
})]));
key.on(light);

function refresh() {
  if (state.model === null || !picker.ref) return;
  const t = temperature.value;
  const params = { model: state.model, ref: picker.ref, query: state.query, layer: Number($("fwd-layer").value),
    head: Number($("fwd-head").value), temperature: t, knockout: state.knockout,
    image: state.imageRef === `${state.model}|${picker.ref}` ? "false" : null };
  remember({ fmodel: state.model, fq: state.query, fl: params.layer, fh: params.head, ft: t === 1 ? null : t,
    fk: state.knockout === "none" ? null : state.knockout });
  run(() => getJSON("/api/forward", params), draw);
}

function setKnockout(value) {
  state.knockout = value;
  for (const button of $("fwd-knockout").querySelectorAll("button")) {
    button.setAttribute("aria-pressed", String(button.dataset.knockout === value));
  }
}

function chooseModel(index) {
  state.model = index;
  state.imageRef = null;
  const model = state.models[index];
  $("fwd-model").value = index;
  for (const [id, n, word] of [["fwd-layer", model.depth, "block"], ["fwd-head", model.heads, "head"]]) {
    const select = $(id);
    const keep = Number(select.value);
    select.replaceChildren(...Array.from({ length: n }, (_, i) => new Option(`${word} ${i}`, i)));
    select.value = keep < n ? keep : 0;
  }
  const [gh, gw] = model.grid;
  if (state.query === null || (typeof state.query === "number" && state.query >= gh * gw)) {
    state.query = Math.floor(gh / 2) * gw + Math.floor(gw / 2);    // the centre patch: on most images, ink
  }
  refresh();
}

function fromURL() {
  const number = (name) => Number(setting(name));
  const t = number("ft");
  if (t > 0) temperature.set(t);
  const query = setting("fq");
  if (query === "cls" || /^\d+$/.test(query || "")) state.query = query === "cls" ? "cls" : Number(query);
  if (["head", "layer"].includes(setting("fk"))) setKnockout(setting("fk"));
  return { layer: number("fl"), head: number("fh") };
}

export function initForward(info) {
  state.models = info.models;
  temperature = logControl($("fwd-temperature"), { words: "temperature" });
  const select = $("fwd-model");
  const labels = modelLabels(info.models);
  info.models.forEach((model, i) => {
    const option = new Option(model.forward_pass ? `${labels[i]} (cannot be traced)` : labels[i], i);
    option.disabled = Boolean(model.forward_pass);
    option.title = model.forward_pass || model.file;
    select.append(option);
  });
  const first = startingModel(info.models, "forward", setting("fmodel"));
  if (!first) {
    const none = $("forward-none");
    none.textContent = info.models.length ? `None of the models loaded can be traced: ${info.models[0].forward_pass}.`
      : "No checkpoint loaded: start `vitlab explore --checkpoint RUN_OR_FILE` with a ViT, or train one here.";
    offerTraining(page, none, info);
    setState(page, "ready");
    return;
  }
  const wanted = fromURL();
  select.addEventListener("change", () => chooseModel(Number(select.value)));
  for (const id of ["fwd-layer", "fwd-head"]) $(id).addEventListener("change", refresh);
  $("fwd-temperature").addEventListener("input", refresh);
  for (const button of $("fwd-knockout").querySelectorAll("button")) {
    button.addEventListener("click", () => { setKnockout(button.dataset.knockout); refresh(); });
  }
  onImage(() => { state.imageRef = null; refresh(); });
  const model = first;
  $("fwd-layer").replaceChildren(...Array.from({ length: model.depth }, (_, i) => new Option(`block ${i}`, i)));
  $("fwd-head").replaceChildren(...Array.from({ length: model.heads }, (_, i) => new Option(`head ${i}`, i)));
  if (wanted.layer >= 0 && wanted.layer < model.depth) $("fwd-layer").value = wanted.layer;
  if (wanted.head >= 0 && wanted.head < model.heads) $("fwd-head").value = wanted.head;
  chooseModel(model.index);
}
