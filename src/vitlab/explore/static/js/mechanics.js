// Mechanics page: softmax with temperature, token mixing with a bandwidth, and the geometry of
// position encodings, each drawn from the server's numbers. Each panel has its own controls, its own
// error line beside them and its own state.
import { $, announce, decode, getJSON, latest, modelLabels } from "./api.js";
import { cursor, gridHit, link } from "./cursor.js";
import { colourBar, describe, drawBars, drawHeat, drawOverlay, fitBox, lineChart, paintHighlight, paintNumbers,
  paintOutline, surface } from "./draw.js";
import { count, measure, prob, signed } from "./format.js";
import { remember, setting } from "./state.js";

const runSoftmax = latest($("softmax-panel"), $("softmax-error"));
const runMixing = latest($("mixing-panel"), $("mixing-error"));
const runPositions = latest($("positions-panel"), $("positions-error"));
// The reference patch as (row, column), kept when the grid or the encoding changes.
const positions = { at: [0, 0], result: null, box: null, models: [], grid: null, dim: null };
const patch = link();

function facts(list, pairs) {
  list.replaceChildren();
  for (const [name, value] of pairs) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value;
    list.append(dt, dd);
  }
}

// A log-scale slider's value, shown beside it and given to assistive technology as words.
function logSlider(id, digits, words) {
  const value = Number((10 ** Number($(id).value)).toFixed(digits));
  $(`${id}-value`).textContent = value;
  $(id).setAttribute("aria-valuetext", `${words} ${value}`);
  return value;
}

function softmax() {
  const temperature = logSlider("softmax-temperature", 3, "temperature");
  remember({ st: temperature === 1 ? null : temperature });
  runSoftmax(() => getJSON("/api/mechanics/softmax", { temperature }), (r) => {
    const scores = Array.from(decode(r.scores).data), weights = Array.from(decode(r.weights).data);
    const labels = scores.map((_, i) => String(i));
    drawBars($("softmax-scores"), scores, { labels });
    describe($("softmax-scores"),
      `scores of ${r.keys} keys, from ${measure(Math.min(...scores))} to ${measure(Math.max(...scores))}`);
    drawBars($("softmax-weights"), weights, { line: r.uniform, lineLabel: `1/N = ${prob(r.uniform)}`, labels,
      top: $("softmax-auto").checked ? null : 1 });
    describe($("softmax-weights"), `weights of ${r.keys} keys at temperature ${r.temperature}: largest ` +
      `${prob(r.stats.max)}, uniform ${prob(r.uniform)}`);
    facts($("softmax-facts"), [["keys N", count(r.keys)], ["largest weight", prob(r.stats.max)],
      ["spread (max − min)", prob(r.stats.spread)], ["entropy (nats)", measure(r.stats.entropy)],
      ["distance from uniform", measure(r.stats.uniform_distance)]]);
    announce(`temperature ${r.temperature}: largest weight ${prob(r.stats.max)}`);
  });
}

function mixing() {
  const bandwidth = logSlider("mixing-bandwidth", 3, "bandwidth");
  remember({ bw: bandwidth });
  runMixing(() => getJSON("/api/mechanics/mixing", { bandwidth }), (r) => {
    const matrix = decode(r.matrix);
    const scale = { lo: 0, hi: $("mixing-auto").checked ? r.matrix_max : 1, map: "viridis" };
    drawHeat($("mixing-matrix"), matrix.data, r.tokens, r.tokens, scale);
    colourBar($("mixing-scale"), scale, "weight", prob);
    describe($("mixing-matrix"), `mixing matrix ${r.tokens} × ${r.tokens}, largest weight ${prob(r.matrix_max)}`);
    const x = Array.from({ length: r.tokens }, (_, i) => i);
    lineChart($("mixing-signal"), $("mixing-legend"), [
      { label: "values v", x, y: Array.from(decode(r.values).data), colour: "#7f7f7f" },
      { label: "mixed y = A v", x, y: Array.from(decode(r.mixed).data), colour: "#1f77b4" }],
    { xLabel: "token", yLabel: "value", points: true });
    facts($("mixing-facts"), [["tokens", count(r.tokens)], ["largest weight in A", prob(r.matrix_max)],
      ["tokens each output averages, exp(entropy), mean over rows", measure(r.mean_reach)],
      ["row sums (min … max)", `${prob(r.row_sum_range[0])} … ${prob(r.row_sum_range[1])}`]]);
    announce(`bandwidth ${r.bandwidth}: each output averages about ${measure(r.mean_reach)} tokens`);
  });
}

// The grid the next answer will have: the model's for learned positions, else the slider's.
function nextGrid(kind) {
  if (kind === "learned") {
    const model = positions.models[Number($("pos-model").value)];
    return model && model.grid.length === 2 ? model.grid : [8, 8];
  }
  const side = Number($("pos-grid").value);
  return [side, side];
}

function positionParams() {
  const kind = $("pos-kind").value;
  const [gh, gw] = nextGrid(kind);
  const reference = Math.min(positions.at[0], gh - 1) * gw + Math.min(positions.at[1], gw - 1);
  const params = { kind, grid: Number($("pos-grid").value), dim: Number($("pos-dim").value),
    base: Number((10 ** Number($("pos-base").value)).toFixed(1)), reference };
  if (kind === "learned" && positions.models.length) params.model = Number($("pos-model").value);
  return params;
}

function showPositionSettings(kind, grid = null, dim = null) {
  const learned = kind === "learned";
  const slider = $("pos-grid");
  // Learned positions have the model's grid and width: the disabled controls show those, not the last chosen.
  if (learned && grid) {
    slider.value = grid[0];
    $("pos-grid-value").textContent = grid[0] === grid[1] ? `${grid[0]}` : `${grid[0]} × ${grid[1]}`;
    slider.setAttribute("aria-valuetext", `${grid[0]} by ${grid[1]}, the model's grid`);
    const select = $("pos-dim");
    if (dim && ![...select.options].some((o) => Number(o.value) === dim)) select.append(new Option(String(dim), dim));
    if (dim) select.value = dim;
  } else if (!learned) {
    if (positions.grid !== null) { slider.value = positions.grid; positions.grid = null; }
    if (positions.dim !== null) { $("pos-dim").value = positions.dim; positions.dim = null; }
    $("pos-grid-value").textContent = slider.value;
    slider.setAttribute("aria-valuetext", `${slider.value} by ${slider.value}`);
  }
  for (const id of ["pos-grid", "pos-dim"]) $(id).disabled = learned;
  $("pos-base").disabled = kind !== "sincos";
  $("pos-model").disabled = !learned || !positions.models.length;
}

function positionsRefresh() {
  const kind = $("pos-kind").value;
  const model = positions.models[Number($("pos-model").value)];
  if (kind === "learned" && positions.grid === null) {
    positions.grid = Number($("pos-grid").value);         // the user's choices, restored when leaving "learned"
    positions.dim = Number($("pos-dim").value);
  }
  showPositionSettings(kind, kind === "learned" && model ? model.grid : null, model ? model.embed_dim : null);
  const params = positionParams();
  const base = params.base;
  $("pos-base-value").textContent = base;
  $("pos-base").setAttribute("aria-valuetext", `frequency base ${base}`);
  remember({ kind: params.kind, grid: params.kind === "learned" ? null : params.grid,
    dim: params.kind === "learned" ? null : params.dim, base: params.kind === "sincos" ? base : null,
    refpatch: positions.at.join(".") });
  runPositions(() => getJSON("/api/mechanics/positions", params), (r) => {
    positions.result = r;
    const [gh, gw] = r.grid;
    positions.at = [Math.floor(r.reference / gw), r.reference % gw];
    if (r.kind === "learned") showPositionSettings(r.kind, r.grid, r.dim);
    const scale = $("pos-auto").checked ? { lo: r.range[0], hi: r.range[1], map: "viridis" }
      : { lo: -1, hi: 1, map: "diverging" };
    const map = $("pos-map");
    const s = surface(map);
    drawHeat(map, decode(r.reference_map).data, gh, gw, scale);
    positions.box = fitBox(s, gh, gw);
    paintOutline(s, positions.box, gh, gw, r.reference, "#111");
    paintNumbers(s, positions.box, gh, gw, 22);
    mapCursor.layout(gh * gw, gw, gridHit(positions.box, gh, gw), r.reference);
    const matrix = $("pos-matrix");
    const n = gh * gw;
    positions.matrixBox = fitBox(surface(matrix), n, n);
    drawHeat(matrix, decode(r.similarity).data, n, n, scale, { box: positions.matrixBox });
    matrixCursor.layout(n, 1, (x, y) => gridHit(positions.matrixBox, n, n)(x, y) < 0 ? -1
      : Math.floor(((y - positions.matrixBox.y) / positions.matrixBox.h) * n));
    colourBar($("pos-scale"), scale, "cosine similarity", signed);
    colourBar($("pos-matrix-scale"), scale, "cosine similarity", signed);
    describe($("pos-matrix"), `cosine similarity of all ${n} × ${n} pairs of positions, from ${signed(r.range[0])} ` +
      `to ${signed(r.range[1])}`);
    $("pos-ref-caption").textContent =
      `similarity to patch ${r.reference}, colour ${signed(scale.lo)} … ${signed(scale.hi)}`;
    facts($("pos-facts"), [["positions", `${gh} × ${gw} grid, width ${r.dim}`],
      ["mean similarity of adjacent patches", signed(r.adjacent)], ["mean over all pairs", signed(r.all_pairs)]]);
    lightPositions(patch.get());
    announce(`${r.kind} positions: adjacent patches ${signed(r.adjacent)}, all pairs ${signed(r.all_pairs)}`);
  });
}

// Patch `k` lit on the reference map, and its row and column of the all-pairs matrix.
function lightPositions(k) {
  const r = positions.result;
  if (!r) return;
  const [gh, gw] = r.grid;
  const n = gh * gw;
  const on = k !== null && k < n ? k : null;
  drawOverlay($("pos-map"), (s) => paintHighlight(s, positions.box, gh, gw, on));
  drawOverlay($("pos-matrix"), (s) => {
    if (on === null) return;
    const { x, y, w, h } = positions.matrixBox;
    s.ctx.strokeStyle = "#ff2d55";
    s.ctx.lineWidth = Math.max(1, h / n);
    s.ctx.strokeRect(x, y + (on * h) / n, w, h / n);
    s.ctx.strokeRect(x + (on * w) / n, y, w / n, h);
  });
  $("pos-map").dataset.highlight = on ?? "";
  $("pos-matrix").dataset.highlight = on ?? "";
}

const describeCell = (k) => {
  const gw = positions.result ? positions.result.grid[1] : 8;
  return `patch ${k}: row ${Math.floor(k / gw)}, column ${k % gw}`;
};
const mapCursor = cursor($("pos-map"), { label: "reference patch (Enter makes it the reference)",
  describe: describeCell, onMove: patch.set,
  onPick: (k) => {
    const gw = positions.result.grid[1];
    positions.at = [Math.floor(k / gw), k % gw];
    positionsRefresh();
  } });
const matrixCursor = cursor($("pos-matrix"), { label: "rows of the all-pairs matrix", describe: (k) => `row ${k}`,
  onMove: patch.set });
patch.on(lightPositions);

// The settings in the URL, applied once when the page starts.
function fromURL() {
  const number = (name) => Number(setting(name));
  if (number("st") > 0) $("softmax-temperature").value = Math.log10(number("st"));
  if (number("bw") > 0) $("mixing-bandwidth").value = Math.log10(number("bw"));
  const kind = setting("kind");
  if ([...$("pos-kind").options].some((o) => o.value === kind && !o.disabled)) $("pos-kind").value = kind;
  if (number("grid") >= 2) $("pos-grid").value = number("grid");
  if ([...$("pos-dim").options].some((o) => o.value === setting("dim"))) $("pos-dim").value = setting("dim");
  if (number("base") >= 10) $("pos-base").value = Math.log10(number("base"));
  const at = (setting("refpatch") || "").split(".").map(Number);
  if (at.length === 2 && at.every((v) => Number.isInteger(v) && v >= 0)) positions.at = at;
}

export function initMechanics(info) {
  positions.models = info.models;
  for (const kind of info.position_kinds) {
    const needsModel = kind === "learned" && !info.models.length;
    const option = new Option(needsModel ? `${kind} (needs a checkpoint)` : kind, kind);
    option.disabled = needsModel;
    $("pos-kind").append(option);
  }
  modelLabels(info.models).forEach((label, i) => {
    const option = new Option(label, i);
    option.title = info.models[i].file;
    $("pos-model").append(option);
  });
  fromURL();
  $("softmax-temperature").addEventListener("input", softmax);
  $("softmax-auto").addEventListener("change", softmax);
  $("mixing-bandwidth").addEventListener("input", mixing);
  $("mixing-auto").addEventListener("change", mixing);
  for (const id of ["pos-kind", "pos-grid", "pos-dim", "pos-base", "pos-model", "pos-auto"]) {
    $(id).addEventListener("input", positionsRefresh);
  }
  softmax();
  mixing();
  positionsRefresh();
}
