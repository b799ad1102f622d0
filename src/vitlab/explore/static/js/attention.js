// Attention page: a checkpoint's attention from the chosen query, per layer and head, at a temperature;
// the head's weights against the uniform 1/N; what the model sees; rollout, gradient and occlusion maps.
// A patch is linked across the query image, the bars, every head and every map: hover or focus it on
// any of them (arrow keys move) and it lights up on all.
import { $, announce, decode, getJSON, latest, modelLabels } from "./api.js";
import { arrowKeys, cursor, gridHit, link, roving } from "./cursor.js";
import { colourBar, describe, drawBars, drawHeat, drawOverlay, facts, makeCanvas, paintGrid, paintHeat,
  paintHighlight, paintImage, paintNumbers, paintOutline, surface } from "./draw.js";
import { count, measure, prob, signed } from "./format.js";
import { onImage, picker } from "./picker.js";
import { remember, setting } from "./state.js";

const page = $("page-attention");
const run = latest(page, $("attention-error"));
const runMaps = latest($("attn-maps"), $("maps-error"));
const key = link();           // the key (prefix tokens first, then the patches) under the pointer or keyboard
const state = { models: [], model: null, query: "mean", head: null, result: null, maps: null, box: null, bars: null };
let chooseModel = null;      // set when the page starts
const MAP_TITLES = {
  rollout: "attention rollout", gradient: "gradient |∂ logit / ∂ x|", occlusion: "occlusion: drop in probability",
};

function temperature() {
  return Number((10 ** Number($("attn-temperature").value)).toFixed(3));
}

const auto = () => $("attn-auto").checked;

function keyLabels(result) {
  const hasClass = state.models[state.model].class_token;
  const prefix = Array.from({ length: result.prefix }, (_, i) => (i === 0 && hasClass ? "cls" : `r${i}`));
  return [...prefix, ...Array.from({ length: result.keys - result.prefix }, (_, i) => String(i))];
}

const patchOf = (k) => (state.result && k !== null && k >= state.result.prefix ? k - state.result.prefix : null);

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
  if (typeof result.query === "number") paintOutline(s, state.box, gh, gw, result.query);
  queryCursor.layout(gh * gw, gw, gridHit(state.box, gh, gw), typeof result.query === "number" ? result.query : 0);
  $("attn-query-caption").textContent = typeof result.query === "number"
    ? `query: patch ${result.query} (choose another)`
    : `query: ${result.query === "cls" ? "the class token" : "mean of the patch rows"} (choose a patch)`;
  $("attn-cls").setAttribute("aria-pressed", String(result.query === "cls"));
  $("attn-mean").setAttribute("aria-pressed", String(result.query === "mean"));
}

function drawPrediction(prediction) {
  const box = $("attn-prediction");
  box.replaceChildren();
  const top = document.createElement("div");
  top.className = "top";
  top.textContent = `${prediction.class} (probability ${prob(prediction.confidence)})`;
  box.append(top);
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

function drawHeads(result, image) {
  const heat = decode(result.heat);
  const [layers, heads, gh, gw] = heat.shape;
  const max = decode(result.stats.max).data, spread = decode(result.stats.spread).data;
  const grid = $("attn-heads");
  grid.replaceChildren();
  grid.dataset.query = result.query;
  grid.style.gridTemplateColumns = `max-content repeat(${heads}, minmax(0, 7rem))`;
  if (!state.head || state.head[0] >= layers || state.head[1] >= heads) state.head = [layers - 1, 0];
  const scale = headScale(result);
  for (let l = 0; l < layers; l++) {
    const label = document.createElement("div");
    label.className = "layer";
    label.textContent = `layer ${l}`;
    grid.append(label);
    for (let h = 0; h < heads; h++) {
      const k = l * heads + h;
      const figure = document.createElement("figure");
      figure.dataset.layer = l; figure.dataset.head = h;
      const selected = l === state.head[0] && h === state.head[1];
      figure.classList.toggle("selected", selected);
      const button = document.createElement("button");
      button.type = "button";
      button.className = "head";
      button.setAttribute("aria-pressed", String(selected));
      button.setAttribute("aria-label",
        `layer ${l}, head ${h}: largest weight ${prob(max[k])}, spread ${prob(spread[k])}`);
      const canvas = makeCanvas(110, 110);
      canvas.classList.add("fluid", "heatmap");
      canvas.setAttribute("aria-hidden", "true");
      canvas.dataset.colourbar = "attn-heads-scale";
      const s = surface(canvas);
      const box = paintImage(s, image);
      paintHeat(s, heat.data, gh, gw, scale, { box, alpha: 0.75, offset: k * gh * gw });
      if (typeof result.query === "number") paintOutline(s, box, gh, gw, result.query);
      canvas.box = box;
      canvas.addEventListener("pointermove", (event) => {
        const rect = canvas.getBoundingClientRect();
        const at = gridHit(box, gh, gw)(((event.clientX - rect.left) * 110) / rect.width,
          ((event.clientY - rect.top) * 110) / rect.height);
        key.set(at >= 0 ? result.prefix + at : null);
      });
      canvas.addEventListener("pointerleave", () => key.set(null));
      const caption = document.createElement("figcaption");
      caption.textContent = `head ${h}: max ${prob(max[k])} · spread ${prob(spread[k])}`;
      caption.setAttribute("aria-hidden", "true");
      button.append(canvas);
      figure.append(button, caption);
      button.addEventListener("click", () => {
        state.head = [l, h];
        remember({ head: `${l}.${h}` });
        for (const other of grid.querySelectorAll("figure")) {
          const on = other === figure;
          other.classList.toggle("selected", on);
          other.querySelector("button").setAttribute("aria-pressed", String(on));
        }
        roving([...grid.querySelectorAll("button")], k);
        drawHeadBars(result);
      });
      grid.append(figure);
    }
  }
  roving([...grid.querySelectorAll("button")], state.head[0] * heads + state.head[1]);
  colourBar($("attn-heads-scale"), scale, auto() ? "attention weight (stretched to the largest)" : "attention weight",
    prob);
  $("attn-scale").textContent = `colour 0 … ${prob(scale.hi)} ` +
    `(${auto() ? "stretched to the largest weight on a patch" : "fixed: weights are probabilities"}; ` +
    `the largest is ${prob(result.heat_max)}), temperature ${result.temperature}`;
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
    lineLabel: `uniform 1/N = ${prob(result.uniform)}`, selected, highlight, labels: keyLabels(result),
    top: auto() ? null : 1 });
  const keyAt = (x) => (x < geometry.left ? -1 : Math.min(n - 1, Math.floor((x - geometry.left) / geometry.step)));
  barsCursor.layout(n, 1, keyAt, barsCursor.at);
  $("attn-bars").dataset.highlight = highlight >= 0 ? highlight : "";
  $("attn-bars-caption").textContent = `layer ${l}, head ${h}: weights over the ${n} keys`;
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
  drawQuery(result, image);
  drawPrediction(result.prediction);
  drawHeads(result, image);
  drawHeadBars(result);
  drawSeen(result.seen, image);
  $("attn-uniform-note").textContent =
    `The dashed line, 1/N = ${prob(result.uniform)} for N = ${count(result.keys)} keys, ` +
    "is the weight a head that ignored content would give every key.";
  light(key.get());
  announce(`predicted ${result.prediction.class} with probability ${prob(result.prediction.confidence)}; ` +
    `query ${queryWords(result.query)}, temperature ${result.temperature}`);
}

function mapScale(method, range) {
  const reach = Math.max(Math.abs(range[0]), Math.abs(range[1])) || 1;
  if (method === "occlusion") return { lo: auto() ? -reach : -1, hi: auto() ? reach : 1, map: "diverging" };
  if (method === "rollout" && !auto()) return { lo: 0, hi: 1, map: "viridis" };
  return { lo: 0, hi: range[1] || 1, map: "viridis" };
}

function drawMaps(answer) {
  state.maps = answer;
  const row = $("attn-maps-row");
  row.replaceChildren();
  const image = decode(state.result.image);
  const [gh, gw] = state.result.grid;
  for (const [method, map] of Object.entries(answer.maps)) {
    const figure = document.createElement("figure");
    figure.className = "heatmap";
    figure.dataset.method = method;
    const caption = document.createElement("figcaption");
    const format = method === "occlusion" ? signed : method === "rollout" ? prob : measure;
    caption.textContent = `${MAP_TITLES[method] || method}: ${format(map.range[0])} … ${format(map.range[1])}`;
    const canvas = makeCanvas(170, 170);
    canvas.dataset.colourbar = `map-scale-${method}`;
    canvas.classList.add("heatmap");
    const scale = mapScale(method, map.range);
    const s = surface(canvas);
    const box = paintImage(s, image);
    paintHeat(s, decode(map.values).data, gh, gw, scale, { box, alpha: 0.78 });
    canvas.box = box;
    describe(canvas,
      `${MAP_TITLES[method] || method} over the image, from ${format(map.range[0])} to ${format(map.range[1])}`);
    const bar = document.createElement("div");
    bar.className = "colourbar";
    bar.id = `map-scale-${method}`;
    colourBar(bar, scale, method === "occlusion" ? "drop in probability (red: supports the prediction)"
      : method === "rollout" ? "share of the query's final state" : "gradient magnitude", format);
    figure.append(caption, canvas, bar);
    row.append(figure);
    canvas.addEventListener("pointermove", (event) => {
      const rect = canvas.getBoundingClientRect();
      const at = gridHit(box, gh, gw)(((event.clientX - rect.left) * 170) / rect.width,
        ((event.clientY - rect.top) * 170) / rect.height);
      key.set(at >= 0 ? state.result.prefix + at : null);
    });
    canvas.addEventListener("pointerleave", () => key.set(null));
  }
  $("attn-target").textContent = `for the predicted class ${answer.target}`;
  light(key.get());
}

// Key `k` lit on the query image, among the bars, in every head and every map (null: none).
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
  if (state.bars) drawHeadBars(state.result);
}

const queryCursor = cursor($("attn-image"), {
  label: "query patch (Enter makes it the query)",
  describe: (p) => describeKey((state.result?.prefix ?? 0) + p),
  onMove: (p) => key.set(p === null ? null : (state.result?.prefix ?? 0) + p),
  onPick: (p) => { state.query = p; refresh(); },
});
const barsCursor = cursor($("attn-bars"), { label: "the selected head's weight on each key", describe: describeKey,
  onMove: key.set });
key.on(light);

function refresh(withMaps = true) {
  if (state.model === null || !picker.ref) return;
  const options = { invert: $("attn-invert").checked || null, keep_aspect: $("attn-aspect").checked || null };
  const params = { model: state.model, ref: picker.ref, query: state.query, ...options };
  remember({ model: state.model, query: state.query, t: temperature() === 1 ? null : temperature(),
    invert: options.invert && 1, aspect: options.keep_aspect && 1 });
  run(() => getJSON("/api/attention", { ...params, temperature: temperature() }), (result) => {
    draw(result);
    if (withMaps) runMaps(() => getJSON("/api/maps", params), drawMaps);
    else if (state.maps) drawMaps(state.maps);
  });
}

// The settings in the URL, applied once when the page starts.
function fromURL() {
  const t = Number(setting("t"));
  if (t > 0) $("attn-temperature").value = Math.log10(t);
  $("attn-auto").checked = setting("scale") === "auto";
  $("attn-invert").checked = setting("invert") === "1";
  $("attn-aspect").checked = setting("aspect") === "1";
  const head = (setting("head") || "").split(".").map(Number);
  if (head.length === 2 && head.every(Number.isInteger)) state.head = head;
  const query = setting("query");
  return query === null ? null : /^\d+$/.test(query) ? Number(query) : query;
}

export function initAttention(info) {
  state.models = info.models;
  const select = $("attn-model");
  modelLabels(info.models).forEach((label, i) => {
    const option = new Option(label, i);
    option.title = info.models[i].file;
    select.append(option);
  });
  if (!info.models.length) {
    $("attention-none").hidden = false;
    page.dataset.state = "ready";
    return;
  }
  const choose = (index, query = null) => {
    state.model = index;
    select.value = index;
    const model = info.models[index];
    state.query = query ?? (model.pool === "token" && model.class_token ? "cls" : "mean");
    $("attn-cls").disabled = !model.class_token;
    refresh();
  };
  chooseModel = choose;
  select.addEventListener("change", () => choose(Number(select.value)));
  $("attn-cls").addEventListener("click", () => { state.query = "cls"; refresh(); });
  $("attn-mean").addEventListener("click", () => { state.query = "mean"; refresh(); });
  const slider = $("attn-temperature");
  const showT = () => {
    $("attn-temperature-value").textContent = temperature();
    slider.setAttribute("aria-valuetext", `temperature ${temperature()}`);
  };
  slider.addEventListener("input", () => { showT(); refresh(false); });
  $("attn-auto").addEventListener("change", () => {
    remember({ scale: auto() ? "auto" : null });
    if (state.result) draw(state.result);
    if (state.maps) drawMaps(state.maps);
  });
  for (const id of ["attn-invert", "attn-aspect"]) $(id).addEventListener("change", () => refresh());
  arrowKeys($("attn-heads"), "button", () => state.result ? decode(state.result.stats.max).shape[1] : 1);
  const query = fromURL();
  showT();
  onImage(() => refresh());
  const wanted = Number(setting("model"));
  choose(Number.isInteger(wanted) && wanted >= 0 && wanted < info.models.length ? wanted : 0, query);
}

// Show model `index` (from a link on another page); before the page starts, the URL's model= does it.
export function openModel(index) {
  if (chooseModel) chooseModel(index);
}
