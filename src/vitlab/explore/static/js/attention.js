// Attention page: a checkpoint's attention from the clicked query, per layer and head, at a
// temperature; the head's weights against the uniform 1/N; rollout, gradient and occlusion maps.
import { $, decode, fmt, getJSON, latest } from "./api.js";
import { cellAt, drawBars, drawGridLines, drawHeat, drawImage, outlineCell } from "./draw.js";
import { onImage, picker } from "./picker.js";

const page = $("page-attention");
const run = latest(page, $("attention-error"));
const runMaps = latest($("attn-maps"), $("attention-error"));
const state = { models: [], model: null, query: "mean", head: null, result: null, box: null };
const MAP_TITLES = {
  rollout: "attention rollout", gradient: "gradient |∂ logit / ∂ x|", occlusion: "occlusion: drop in probability",
};

function temperature() {
  return Number((10 ** Number($("attn-temperature").value)).toFixed(3));
}

function keyLabels(result) {
  const hasClass = state.models[state.model].class_token;
  const prefix = Array.from({ length: result.prefix }, (_, i) => (i === 0 && hasClass ? "cls" : `r${i}`));
  return [...prefix, ...Array.from({ length: result.keys - result.prefix }, (_, i) => String(i))];
}

function drawQuery(result) {
  const image = decode(result.image);
  const canvas = $("attn-image");
  const [gh, gw] = result.grid;
  state.box = drawImage(canvas, image);
  drawGridLines(canvas, state.box, gh, gw);
  if (typeof result.query === "number") outlineCell(canvas, state.box, gh, gw, result.query);
  $("attn-query-caption").textContent = typeof result.query === "number" ? `query: patch ${result.query} (click another)`
    : result.query === "cls" ? "query: the class token (click a patch)" : "query: mean of the patch rows (click a patch)";
  return image;
}

function drawPrediction(prediction) {
  const box = $("attn-prediction");
  box.replaceChildren();
  const top = document.createElement("div");
  top.className = "top";
  top.textContent = `${prediction.class}  ${fmt(prediction.confidence, 4)}`;
  box.append(top);
  for (const entry of prediction.top) {
    const bar = document.createElement("div");
    bar.className = "bar";
    const fill = document.createElement("span");
    fill.style.width = `${100 * entry.probability}%`;
    const text = document.createElement("b");
    text.textContent = `${entry.class}: ${fmt(entry.probability, 4)}`;
    bar.append(fill, text);
    box.append(bar);
  }
}

function drawHeads(result, image) {
  const heat = decode(result.heat);
  const [layers, heads, gh, gw] = heat.shape;
  const max = decode(result.stats.max).data, spread = decode(result.stats.spread).data;
  const grid = $("attn-heads");
  grid.replaceChildren();
  grid.dataset.query = result.query;
  grid.style.gridTemplateColumns = `4rem repeat(${heads}, max-content)`;
  if (!state.head || state.head[0] >= layers || state.head[1] >= heads) state.head = [layers - 1, 0];
  for (let l = 0; l < layers; l++) {
    const label = document.createElement("div");
    label.className = "layer";
    label.textContent = `layer ${l}`;
    grid.append(label);
    for (let h = 0; h < heads; h++) {
      const k = l * heads + h;
      const figure = document.createElement("figure");
      figure.dataset.layer = l; figure.dataset.head = h;
      figure.classList.toggle("selected", l === state.head[0] && h === state.head[1]);
      const canvas = document.createElement("canvas");
      canvas.width = canvas.height = 110;
      const box = drawImage(canvas, image);
      drawHeat(canvas, heat.data, gh, gw, 0, result.heat_max, { box, alpha: 0.7, offset: k * gh * gw });
      if (typeof result.query === "number") outlineCell(canvas, box, gh, gw, result.query);
      const caption = document.createElement("figcaption");
      caption.textContent = `head ${h}: max ${fmt(max[k], 3)} · spread ${fmt(spread[k], 3)}`;
      figure.append(canvas, caption);
      figure.addEventListener("click", () => { state.head = [l, h]; drawHeads(result, image); drawHeadBars(result); });
      grid.append(figure);
    }
  }
  $("attn-scale").textContent =
    `colour 0 … ${fmt(result.heat_max, 4)} (the largest weight on a patch), temperature ${result.temperature}`;
}

function drawHeadBars(result) {
  const rows = decode(result.rows);
  const [layers, heads, n] = rows.shape;
  const [l, h] = state.head;
  const values = Array.from(rows.data.subarray((l * heads + h) * n, (l * heads + h + 1) * n));
  const highlight = typeof result.query === "number" ? result.prefix + result.query : -1;
  drawBars($("attn-bars"), values, { line: result.uniform, lineLabel: `uniform 1/N = ${fmt(result.uniform, 4)}`,
    highlight, labels: keyLabels(result) });
  $("attn-bars-caption").textContent = `layer ${l}, head ${h}: weights over the ${n} keys`;
}

function draw(result) {
  state.result = result;
  const image = drawQuery(result);
  drawPrediction(result.prediction);
  drawHeads(result, image);
  drawHeadBars(result);
}

function drawMaps(answer) {
  const box = $("attn-maps");
  box.replaceChildren();
  const image = decode(state.result.image);
  const [gh, gw] = state.result.grid;
  for (const [method, map] of Object.entries(answer.maps)) {
    const figure = document.createElement("figure");
    figure.dataset.method = method;
    const caption = document.createElement("figcaption");
    caption.textContent = `${MAP_TITLES[method] || method}: ${fmt(map.range[0], 4)} … ${fmt(map.range[1], 4)}`;
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 170;
    const area = drawImage(canvas, image);
    drawHeat(canvas, decode(map.values).data, gh, gw, map.range[0], map.range[1], { box: area, alpha: 0.78 });
    figure.append(caption, canvas);
    box.append(figure);
  }
  $("attn-target").textContent = `for the predicted class ${answer.target}`;
}

function refresh(withMaps = true) {
  if (state.model === null || !picker.ref) return;
  const params = { model: state.model, ref: picker.ref, query: state.query };
  run(() => getJSON("/api/attention", { ...params, temperature: temperature() }), (result) => {
    draw(result);
    if (withMaps) runMaps(() => getJSON("/api/maps", params), drawMaps);
  });
}

export function initAttention(info) {
  state.models = info.models;
  const select = $("attn-model");
  info.models.forEach((m, i) => select.append(new Option(`${m.model} — ${m.file}`, i)));
  if (!info.models.length) {
    $("attention-none").hidden = false;
    return;
  }
  const choose = (index) => {
    state.model = index;
    const model = info.models[index];
    state.query = model.pool === "token" && model.class_token ? "cls" : "mean";
    $("attn-cls").disabled = !model.class_token;
    refresh();
  };
  select.addEventListener("change", () => choose(Number(select.value)));
  $("attn-cls").addEventListener("click", () => { state.query = "cls"; refresh(); });
  $("attn-mean").addEventListener("click", () => { state.query = "mean"; refresh(); });
  const slider = $("attn-temperature");
  const showT = () => { $("attn-temperature-value").textContent = temperature(); };
  slider.addEventListener("input", () => { showT(); refresh(false); });
  showT();
  $("attn-image").classList.add("clickable");
  $("attn-image").addEventListener("click", (event) => {
    if (!state.result) return;
    const [gh, gw] = state.result.grid;
    const cell = cellAt(event, $("attn-image"), state.box, gh, gw);
    if (cell >= 0) { state.query = cell; refresh(); }
  });
  onImage(() => refresh());
  choose(0);
}
