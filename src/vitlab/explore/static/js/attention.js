// Attention page: a checkpoint's attention from the chosen query, per layer and head, at a temperature;
// the head's weights against the uniform 1/N; each head's statistics; what the model sees; rollout, gradient
// and occlusion maps; and the attention layer by layer beside the positions' similarity grid. A patch is
// linked across the query image, the bars, every head, every map and the layer grid: hover or focus it on
// any of them (arrow keys move) and it lights up on all. A model without attention (a CNN) shows its
// prediction and its gradient and occlusion maps.
import { $, announce, decode, getJSON, inPieces, latest, modelLabels, offerTraining, startingModel, setState }
  from "./api.js";
import { logControl } from "./controls.js";
import { arrowKeys, cursor, gridHit, link, roving } from "./cursor.js";
import { colourBar, describe, drawBars, drawHeat, drawOverlay, facts, makeCanvas, paintGrid, paintHeat,
  paintHighlight, paintImage, paintNumbers, paintOutline, surface } from "./draw.js";
import { count, measure, prob, signed } from "./format.js";
import { drawLayers, drawPositionGrid, lightTiles, tilePatch } from "./layers.js";
import { onImage, picker } from "./picker.js";
import { remember, setting } from "./state.js";
import { numbersTable } from "./table.js";

const page = $("page-attention");
const run = latest(page, $("attention-error"));
const runMaps = inPieces($("attn-maps"), $("maps-error"), $("maps-progress"));  // one map a request, cheapest first
const runLayers = latest($("layers-panel"), $("layers-error"));
const key = link();           // the key (prefix tokens first, then the patches) under the pointer or keyboard
const state = { models: [], model: null, query: "mean", head: null, result: null, maps: null, box: null, bars: null,
  layers: null, positions: null };
let chooseModel = null;      // set when the page starts
let temperature = null;      // the temperature control, set when the page starts
const MAP_TITLES = {
  rollout: "attention rollout", gradient: "gradient |∂ logit / ∂ x|", occlusion: "occlusion: drop in probability",
};

const auto = () => $("attn-auto").checked;
const hasAttention = () => Boolean(state.result && state.result.attention);
const prefixOf = () => (hasAttention() ? state.result.prefix : 0);

function keyLabels(result) {
  const hasClass = state.models[state.model].class_token;
  const prefix = Array.from({ length: result.prefix }, (_, i) => (i === 0 && hasClass ? "cls" : `r${i}`));
  return [...prefix, ...Array.from({ length: result.keys - result.prefix }, (_, i) => String(i))];
}

const patchOf = (k) => (state.result && k !== null && k >= prefixOf() ? k - prefixOf() : null);

function describeKey(k) {
  if (!state.result) return `key ${k}`;
  const patch = patchOf(k);
  if (patch === null) return `key ${keyLabels(state.result)[k]} (a prefix token)`;
  const gw = state.result.grid[1];
  return `patch ${patch}: row ${Math.floor(patch / gw)}, column ${patch % gw}`;
}

function queryWords(query) {
  if (typeof query === "number") return `patch ${query}`;
  return query === "cls" ? "the class token" : "the mean of the patch rows";
}

function drawQuery(result, image) {
  const canvas = $("attn-image");
  const [gh, gw] = result.grid;
  const s = surface(canvas);
  state.box = paintImage(s, image);
  paintGrid(s, state.box, gh, gw);
  paintNumbers(s, state.box, gh, gw);
  const query = result.attention && typeof result.query === "number" ? result.query : null;
  if (query !== null) paintOutline(s, state.box, gh, gw, query);
  queryCursor.layout(gh * gw, gw, gridHit(state.box, gh, gw), query ?? 0);
  $("attn-query-caption").textContent = !result.attention ? `the image, ${gh} × ${gw} squares its maps score`
    : query !== null ? `query: patch ${query} (choose another)`
      : `query: ${result.query === "cls" ? "the class token" : "mean of the patch rows"} (choose a patch)`;
  $("attn-cls").setAttribute("aria-pressed", String(result.query === "cls"));
  $("attn-mean").setAttribute("aria-pressed", String(result.query === "mean"));
}

// The prediction, its top classes, and the true label with ✓ or ✗ when the image is of the model's dataset.
export function drawPrediction(box, prediction, truth) {
  box.replaceChildren();
  const top = document.createElement("div");
  top.className = "top";
  top.textContent = `${prediction.class} (probability ${prob(prediction.confidence)})`;
  const judged = document.createElement("div");
  judged.className = "truth";
  if (truth && truth.correct !== null) {
    judged.classList.add(truth.correct ? "right" : "wrong");
    judged.textContent = truth.correct ? `✓ right: the true label is ${truth.label}`
      : `✗ wrong: the true label is ${truth.label}`;
  } else {
    judged.textContent = truth && truth.label !== null ? `true label ${truth.label} (${truth.note})`
      : `no true label: ${truth ? truth.note : "unknown"}`;
  }
  box.dataset.correct = truth && truth.correct !== null ? String(truth.correct) : "";
  box.append(top, judged);
  if (truth && truth.correct !== null && state.model !== null) {   // a wrong answer looks like a right one
    const more = document.createElement("a");
    more.href = `#limits?lmodel=${state.model}`;
    more.textContent = "its most confident mistakes";
    box.append(more);
  }
  for (const entry of prediction.top) {
    const bar = document.createElement("div");
    bar.className = "bar";
    const fill = document.createElement("span");
    fill.style.width = `${100 * entry.probability}%`;
    const text = document.createElement("b");
    text.textContent = `${entry.class}: ${prob(entry.probability)}`;
    bar.append(fill, text);
    box.append(bar);
  }
}

function headScale(result) {
  return { lo: 0, hi: auto() ? result.heat_max : 1, map: "viridis" };
}

function headFigure(result, image, heat, l, h) {
  const [, heads, gh, gw] = heat.shape;
  const k = l * heads + h;
  const stats = (name) => decode(result.stats[name]).data[k];
  const distance = decode(result.distance).data[k];
  const figure = document.createElement("figure");
  figure.dataset.layer = l; figure.dataset.head = h;
  const selected = l === state.head[0] && h === state.head[1];
  figure.classList.toggle("selected", selected);
  const button = document.createElement("button");
  button.type = "button";
  button.className = "head";
  button.setAttribute("aria-pressed", String(selected));
  button.setAttribute("aria-label", `layer ${l}, head ${h}: largest weight ${prob(stats("max"))}, entropy ` +
    `${measure(stats("entropy"))} nats, mean distance ${measure(distance)} patches`);
  const canvas = makeCanvas(110, 110);
  canvas.classList.add("fluid", "heatmap");
  canvas.setAttribute("aria-hidden", "true");
  canvas.dataset.colourbar = "attn-heads-scale";
  const s = surface(canvas);
  canvas.box = { x: 0, y: 0, w: s.w, h: s.h };
  paintHeat(s, heat.data, gh, gw, headScale(result), { box: canvas.box, offset: k * gh * gw });
  if (typeof result.query === "number") paintOutline(s, canvas.box, gh, gw, result.query);
  canvas.addEventListener("pointermove", (event) => {
    const rect = canvas.getBoundingClientRect();
    const at = gridHit(canvas.box, gh, gw)(((event.clientX - rect.left) * 110) / rect.width,
      ((event.clientY - rect.top) * 110) / rect.height);
    key.set(at >= 0 ? result.prefix + at : null);
  });
  canvas.addEventListener("pointerleave", () => key.set(null));
  const caption = document.createElement("figcaption");
  caption.textContent = `head ${h}: max ${prob(stats("max"))} · entropy ${measure(stats("entropy"))} · ` +
    `distance ${measure(distance)}`;
  caption.setAttribute("aria-hidden", "true");
  button.append(canvas);
  figure.append(button, caption);
  button.addEventListener("click", () => {
    state.head = [l, h];
    remember({ head: `${l}.${h}` });
    for (const other of $("attn-heads").querySelectorAll("figure")) {
      const on = other === figure;
      other.classList.toggle("selected", on);
      other.querySelector("button").setAttribute("aria-pressed", String(on));
    }
    roving([...$("attn-heads").querySelectorAll("button")], k);
    drawHeadBars(result);
  });
  return figure;
}

function drawHeads(result, image) {
  const heat = decode(result.heat);
  const [layers, heads] = heat.shape;
  const grid = $("attn-heads");
  grid.replaceChildren();
  grid.dataset.query = result.query;
  grid.style.gridTemplateColumns = `max-content repeat(${heads}, minmax(0, 7rem))`;
  if (!state.head || state.head[0] >= layers || state.head[1] >= heads) state.head = [layers - 1, 0];
  for (let l = 0; l < layers; l++) {
    const label = document.createElement("div");
    label.className = "layer";
    label.textContent = `layer ${l}`;
    grid.append(label);
    for (let h = 0; h < heads; h++) grid.append(headFigure(result, image, heat, l, h));
  }
  roving([...grid.querySelectorAll("button")], state.head[0] * heads + state.head[1]);
  const scale = headScale(result);
  colourBar($("attn-heads-scale"), scale, auto() ? "attention weight (stretched to the largest)" : "attention weight",
    prob);
  $("attn-scale").textContent = `colour 0 … ${prob(scale.hi)} ` +
    `(${auto() ? "stretched to the largest weight on a patch" : "fixed: weights are probabilities"}; ` +
    `the largest is ${prob(result.heat_max)}), temperature ${result.temperature}`;
  drawStats(result, layers, heads);
}

// Every head's statistics of the query's row, and its mean attention distance, as a table.
function drawStats(result, layers, heads) {
  const names = ["max", "spread", "entropy", "uniform_distance"];
  const values = Object.fromEntries(names.map((n) => [n, decode(result.stats[n]).data]));
  const distance = decode(result.distance).data;
  const rows = [];
  for (let l = 0; l < layers; l++) {
    for (let h = 0; h < heads; h++) {
      const k = l * heads + h;
      rows.push([`layer ${l}, head ${h}`, prob(values.max[k]), prob(values.spread[k]), measure(values.entropy[k]),
        prob(values.uniform_distance[k]), measure(distance[k])]);
    }
  }
  numbersTable($("attn-stats"), `query ${queryWords(result.query)}, temperature ${result.temperature}; ` +
    `uniform: entropy ln ${result.keys} = ${measure(Math.log(result.keys))}`,
  ["head", "largest", "spread", "entropy (nats)", "distance from uniform", "mean distance (patches)"], rows);
}

function drawHeadBars(result) {
  const rows = decode(result.rows);
  const [, heads, n] = rows.shape;
  const [l, h] = state.head;
  const values = Array.from(rows.data.subarray((l * heads + h) * n, (l * heads + h + 1) * n));
  const selected = typeof result.query === "number" ? result.prefix + result.query : -1;
  const highlight = key.get() ?? -1;
  state.bars = { values, selected, l, h };
  const geometry = drawBars($("attn-bars"), values, { line: result.uniform,
    lineLabel: `uniform 1/N = ${prob(result.uniform)}`, selected, highlight, labels: keyLabels(result) });
  const keyAt = (x) => (x < geometry.left ? -1 : Math.min(n - 1, Math.floor((x - geometry.left) / geometry.step)));
  barsCursor.layout(n, 1, keyAt, barsCursor.at);
  $("attn-bars").dataset.highlight = highlight >= 0 ? highlight : "";
  const largest = Math.max(...values.filter(Number.isFinite), result.uniform);
  $("attn-bars-caption").textContent = `layer ${l}, head ${h}: weights over the ${n} keys (axis 0 to ` +
    `${prob(largest)}, the largest weight: weights sum to 1 over the keys)`;
}

function drawSeen(seen, fitted) {
  const [gh, gw] = state.result.grid;
  const s = surface($("seen-fitted"));
  const box = paintImage(s, fitted);
  paintGrid(s, box, gh, gw, "rgba(255, 45, 85, 0.6)");
  const size = `${fitted.shape[1]}×${fitted.shape[2]} ${seen.channels_words}`;
  describe($("seen-fitted"), `the image the model reads: ${size}`);
  $("seen-fitted-caption").textContent = `the image, as read: ${size}`;
  const input = decode(seen.input);
  const [, h, w] = input.shape;
  const reach = Math.max(Math.abs(seen.range[0]), Math.abs(seen.range[1])) || 1;
  const scale = { lo: -reach, hi: reach, map: "diverging" };
  drawHeat($("seen-input"), input.data, h, w, scale);
  const what = input.shape[0] > 1 ? "normalised value, channel 0" : "normalised value";
  colourBar($("seen-input-scale"), scale, what, signed);
  describe($("seen-input"), `the input's ${what}, from ${signed(seen.range[0])} to ${signed(seen.range[1])}`);
  const steps = $("seen-steps");
  steps.replaceChildren();
  for (const step of seen.steps) {
    const item = document.createElement("li");
    item.textContent = step;
    steps.append(item);
  }
  facts($("seen-facts"), [["input mean (training images: about 0)", signed(seen.mean)],
    ["input std (training images: about 1)", measure(seen.std)]]);
  const warning = $("seen-warning");
  warning.hidden = !seen.out_of_domain;
  warning.textContent = seen.out_of_domain || "";
}

function draw(result) {
  state.result = result;
  const image = decode(result.image);
  for (const part of page.querySelectorAll(".with-attention, #attn-bars-figure")) part.hidden = !result.attention;
  $("attention-absent").hidden = result.attention;
  $("attention-absent").textContent = result.attention ? "" : result.reason;
  for (const id of ["attn-cls", "attn-mean", "attn-temperature"]) $(id).disabled = !result.attention;
  $("attn-cls").disabled = !result.attention || !state.models[state.model].class_token;
  drawQuery(result, image);
  drawPrediction($("attn-prediction"), result.prediction, result.truth);
  if (result.attention) {
    drawHeads(result, image);
    drawHeadBars(result);
    $("attn-uniform-note").textContent =
      `The dashed line, 1/N = ${prob(result.uniform)} for N = ${count(result.keys)} keys, ` +
      "is the weight a head that ignored content would give every key.";
  }
  drawSeen(result.seen, image);
  light(key.get());
  const judged = result.truth.correct === null ? "" : result.truth.correct ? ", right" : ", wrong";
  announce(`predicted ${result.prediction.class} with probability ${prob(result.prediction.confidence)}${judged}` +
    (result.attention ? `; query ${queryWords(result.query)}, temperature ${result.temperature}` : ""));
}

// Each map on its own range: rollout and gradient from 0 to their largest value, occlusion (signed) on a range
// symmetric about 0, so that red supports the prediction and blue argues against it.
function mapScale(method, range) {
  const reach = Math.max(Math.abs(range[0]), Math.abs(range[1])) || 1;
  if (method === "occlusion") return { lo: -reach, hi: reach, map: "diverging" };
  return { lo: 0, hi: range[1] || 1, map: "viridis" };
}

function mapFigure(method, map, grid, square = null, patch = null) {
  const [gh, gw] = grid;
  const figure = document.createElement("figure");
  figure.className = "heatmap";
  figure.dataset.method = method;
  const caption = document.createElement("figcaption");
  const format = method === "occlusion" ? signed : method === "rollout" ? prob : measure;
  const coarse = method === "occlusion" && square && patch && square > patch ? ` (occluded ${square}×${square} ` +
    `pixels at a time, ${square / patch}×${square / patch} patches, to keep it quick)` : "";
  caption.textContent = `${MAP_TITLES[method] || method}: ${format(map.range[0])} … ${format(map.range[1])}${coarse}`;
  const canvas = makeCanvas(170, 170);
  canvas.dataset.colourbar = `map-scale-${method}`;
  canvas.classList.add("heatmap");
  const scale = mapScale(method, map.range);
  const s = surface(canvas);
  canvas.box = { x: 0, y: 0, w: s.w, h: s.h };
  const values = decode(map.values).data;
  paintHeat(s, values, gh, gw, scale, { box: canvas.box });
  const bar = document.createElement("div");
  bar.className = "colourbar";
  bar.id = `map-scale-${method}`;
  colourBar(bar, scale, method === "occlusion" ? "drop in probability (red: supports the prediction)"
    : method === "rollout" ? "share of the query's final state" : "gradient magnitude", format);
  figure.append(caption, canvas, bar);
  const title = MAP_TITLES[method] || method;
  cursor(canvas, { label: `${title} over the image's ${gh} × ${gw} squares`,
    describe: (p) => `${describeKey(prefixOf() + p)}: ${format(values[p])}`,
    onMove: (p) => key.set(p === null ? null : prefixOf() + p) }).layout(gh * gw, gw, gridHit(canvas.box, gh, gw));
  return figure;
}

function drawMaps(answer) {
  state.maps = answer;
  const row = $("attn-maps-row");
  row.replaceChildren();
  for (const [method, map] of Object.entries(answer.maps)) row.append(mapFigure(method, map, answer.grid, answer.occlusion_square, answer.patch));
  const squares = answer.patches_of_the_model ? "" : `; it has no patches, so each map scores ${answer.patch}×` +
    `${answer.patch}-pixel squares`;
  $("attn-target").textContent = `for the predicted class ${answer.target}${squares}`;
  light(key.get());
}

function drawLayerPanel(answer) {
  state.layers = answer;
  const kinds = Object.fromEntries(Object.entries(answer.kinds).map(([name, v]) => [name, decode(v).data]));
  state.layers.layout = drawLayers($("layers-grid"), $("layers-scale"), answer, kinds);
  layersCursor.layout(answer.grid[0] * answer.grid[1], answer.grid[1], tilePatch(state.layers.layout),
    layersCursor.at);
  const share = answer.on_prefix.rollout[answer.layers - 1];
  $("layers-caption").textContent = `from ${queryWords(answer.query)}: raw, (A + I) / 2, rollout per layer` +
    (answer.prefix ? ` (the class token keeps ${prob(share)} of the last rollout row)` : "");
  light(key.get());
}

function drawPositions(answer) {
  if (!answer) {
    state.positions = null;
    surface($("posgrid"));
    describe($("posgrid"), "no position table: this model adds no absolute positions");
    $("posgrid-note").textContent = `${state.models[state.model].model} adds no absolute position table ` +
      `(${state.models[state.model].pos_embed ?? "none"}): there is no similarity grid to show.`;
    return;
  }
  const similarity = decode(answer.similarity).data;
  state.positions = { layout: drawPositionGrid($("posgrid"), $("posgrid-scale"), similarity, answer.grid,
    `neighbours ${signed(answer.adjacent)} on average`) };
  posCursor.layout(answer.grid[0] * answer.grid[1], answer.grid[1], tilePatch(state.positions.layout),
    posCursor.at);
  $("posgrid-note").textContent = `${answer.kind} positions of the model: adjacent patches ` +
    `${signed(answer.adjacent)}, all pairs ${signed(answer.all_pairs)} on average.`;
  light(key.get());
}

// Key `k` lit on the query image, among the bars, in every head, every map and every small map (null: none).
function light(k) {
  if (!state.result) return;
  const [gh, gw] = state.result.grid;
  const patch = patchOf(k);
  drawOverlay($("attn-image"), (s) => paintHighlight(s, state.box, gh, gw, patch));
  $("attn-image").dataset.highlight = patch ?? "";
  for (const canvas of document.querySelectorAll("#attn-heads canvas.heatmap, #attn-maps-row canvas.heatmap")) {
    drawOverlay(canvas, (s) => paintHighlight(s, canvas.box, gh, gw, patch));
    canvas.dataset.highlight = patch ?? "";
  }
  if (state.layers?.layout && hasAttention()) lightTiles($("layers-grid"), state.layers.layout, patch);
  if (state.positions?.layout) lightTiles($("posgrid"), state.positions.layout, patch, true);
  if (state.bars && hasAttention()) drawHeadBars(state.result);
}

const queryCursor = cursor($("attn-image"), {
  label: "query patch (Enter makes it the query)",
  describe: (p) => describeKey(prefixOf() + p),
  onMove: (p) => key.set(p === null ? null : prefixOf() + p),
  onPick: (p) => { if (hasAttention()) { state.query = p; refresh(); } },
});
const barsCursor = cursor($("attn-bars"), { label: "the selected head's weight on each key", describe: describeKey,
  onMove: key.set });
const layersCursor = cursor($("layers-grid"), { label: "patches of the layer-by-layer maps",
  describe: (p) => describeKey(prefixOf() + p), onMove: (p) => key.set(p === null ? null : prefixOf() + p) });
const posCursor = cursor($("posgrid"), { label: "patches of the position similarity grid",
  describe: (p) => `${describeKey(prefixOf() + p)}: its map is framed`,
  onMove: (p) => key.set(p === null ? null : prefixOf() + p) });
key.on(light);

function refresh(withMaps = true) {
  if (state.model === null || !picker.ref) return;
  const options = { invert: $("attn-invert").checked || null, keep_aspect: $("attn-aspect").checked || null };
  const params = { model: state.model, ref: picker.ref, query: state.query, ...options };
  const t = temperature.value;
  remember({ model: state.model, query: state.query, t: t === 1 ? null : t,
    invert: options.invert && 1, aspect: options.keep_aspect && 1 });
  run(() => getJSON("/api/attention", { ...params, temperature: t }), (result) => {
    draw(result);
    if (withMaps) {   // the maps and the layers are the model's at temperature 1: a new temperature keeps them
      const methods = [...(result.attention ? ["rollout"] : []), "gradient", "occlusion"];
      let shown = null;
      runMaps(methods.map((method) => () => getJSON("/api/maps", { ...params, method })), (answer) => {
        shown = shown ? { ...answer, maps: { ...shown.maps, ...answer.maps } } : answer;
        drawMaps(shown);
      }, "maps");
      if (result.attention) runLayers(() => getJSON("/api/layers", params), drawLayerPanel);
    }
  });
}

async function refreshPositions() {
  const model = state.models[state.model];
  if (!model.absolute_positions) { drawPositions(null); return; }
  try {
    drawPositions(await getJSON("/api/mechanics/positions", { kind: "learned", model: state.model }));
  } catch (err) {
    $("layers-error").textContent = err.message;
  }
}

// The settings in the URL, applied once when the page starts.
function fromURL() {
  const t = Number(setting("t"));
  if (t > 0) temperature.set(t);
  $("attn-auto").checked = setting("scale") === "auto";
  $("attn-invert").checked = setting("invert") === "1";
  $("attn-aspect").checked = setting("aspect") === "1";
  const head = (setting("head") || "").split(".").map(Number);
  if (head.length === 2 && head.every(Number.isInteger)) state.head = head;
  const query = setting("query");
  return query === null ? null : /^\d+$/.test(query) ? Number(query) : query;
}

// A model trained while the explorer runs, now loaded: one more option.
export function addModel(model, models) {
  state.models = models;
  $("attn-model").append(new Option(modelLabels(models)[model.index], model.index));
}

// The page's "try this" for the model's own data: the drawing pad for a digits model, a photo of one's own otherwise.
function tipFor(model) {
  const tip = $("seen-try");
  if (model.reads_digits) {
    tip.innerHTML = "<b>Try this:</b> draw a digit in black on white, then tick <i>invert the image</i>. " +
      "<b>Notice:</b> the model was trained on light strokes on a dark background; the input's statistics show " +
      "how far an image is from what it learned on.";
    return;
  }
  const classes = model.classes.slice(0, 4).join(", ") + (model.classes.length > 4 ? ", …" : "");
  tip.replaceChildren();
  const parts = [["b", "Try this:"], ["", ` upload a picture of one of its classes (${classes}) and one of something ` +
    "else. "], ["b", "Notice:"], ["", " the input's statistics show how far a picture is from the images it was " +
    "trained on, and a confident answer on something else is still an answer."]];
  for (const [tag, text] of parts) tip.append(tag ? Object.assign(document.createElement(tag), { textContent: text }) : text);
}

export function initAttention(info) {
  state.models = info.models;
  const select = $("attn-model");
  modelLabels(info.models).forEach((label, i) => {
    const option = new Option(label, i);
    option.title = info.models[i].file;
    select.append(option);
  });
  temperature = logControl($("attn-temperature"), { words: "temperature" });
  if (!info.models.length) {
    offerTraining(page, $("attention-none"), info);
    setState(page, "ready");
    return;
  }
  const choose = (index, query = null) => {
    state.model = index;
    state.layers = null;
    select.value = index;
    const model = info.models[index];
    state.query = query ?? (model.pool === "token" && model.class_token ? "cls" : "mean");
    tipFor(model);
    refresh();
    refreshPositions();
  };
  chooseModel = choose;
  select.addEventListener("change", () => choose(Number(select.value)));
  $("attn-cls").addEventListener("click", () => { state.query = "cls"; refresh(); });
  $("attn-mean").addEventListener("click", () => { state.query = "mean"; refresh(); });
  $("attn-temperature").addEventListener("input", () => refresh(false));
  $("attn-auto").addEventListener("change", () => {
    remember({ scale: auto() ? "auto" : null });
    if (state.result) draw(state.result);
    if (state.maps) drawMaps(state.maps);
  });
  for (const id of ["attn-invert", "attn-aspect"]) $(id).addEventListener("change", () => refresh());
  arrowKeys($("attn-heads"), "button", () => state.result?.attention ? decode(state.result.stats.max).shape[1] : 1);
  const query = fromURL();
  onImage(() => refresh());
  choose(startingModel(info.models, "attention", setting("model")).index, query);
}

// Show model `index` (from a link on another page); before the page starts, the URL's model= does it.
export function openModel(index) {
  if (chooseModel) chooseModel(index);
}
