// Mechanics page: softmax with temperature, why scores are divided by √d_k, token mixing with a bandwidth,
// the geometry of position encodings (2-D similarity, 1-D dot products) and synthetic local attention on a
// patch grid, each drawn from the server's numbers. Each panel has its own controls, its own error line
// beside them and its own state.
import { $, announce, decode, getJSON, latest, modelLabels, startingModel } from "./api.js";
import { logControl } from "./controls.js";
import { rankableTable } from "./table.js";
import { cursor, gridHit, link } from "./cursor.js";
import { colourBar, describe, drawBars, drawHeat, drawOverlay, facts, fitBox, lineChart, paintHeat, paintHighlight,
  paintNumbers, paintOutline, paintRowColumn, surface } from "./draw.js";
import { count, measure, prob, signed } from "./format.js";
import { remember, setting } from "./state.js";

const runSoftmax = latest($("softmax-panel"), $("softmax-error"));
const runMixing = latest($("mixing-panel"), $("mixing-error"));
const runPositions = latest($("positions-panel"), $("positions-error"));
const runDots = latest($("dots-panel"), $("dots-error"));
const runLocal = latest($("local-panel"), $("local-error"));
const runQk = latest($("qk-panel"), $("qk-error"));
const logs = {};              // the log-scale sliders, made when the page starts
const qk = { result: null, sort: { sort: null, descending: null } };
// The reference patch as (row, column), kept when the grid or the encoding changes.
const positions = { at: [0, 0], result: null, box: null, models: [], withTable: [], grid: null, dim: null };
const patch = link();
// The 1-D panel's reference position (its row is charted) and each heatmap's box.
const DOT_KINDS = { sincos: "sinusoidal", random: "random" };
const dots = { reference: 0, result: null, values: {}, boxes: {} };
const position = link();
// The synthetic query patch as (row, column), null for the centre of whatever grid is chosen.
const local = { at: null, result: null, weights: null, box: null };
const cell = link();

// The row of an n x n matrix drawn over `box` at (x, y), or -1.
function rowHit(box, n) {
  return (x, y) => (gridHit(box, n, n)(x, y) < 0 ? -1 : Math.floor(((y - box.y) / box.h) * n));
}

// A log-scale slider's value (the exact value a link gave it until it is moved), shown beside it.
function logSlider(id) {
  return logs[id].show();
}

const LOG_SLIDERS = { "softmax-temperature": [3, "temperature"], "mixing-bandwidth": [3, "bandwidth"],
  "dots-scale": [2, "frequency scale"], "local-sigma": [2, "sigma"] };

function qkRefresh() {
  const keys = Number($("qk-keys").value);
  remember({ qkeys: keys === 64 ? null : keys });
  runQk(() => getJSON("/api/mechanics/qk-scale", { keys }), (r) => {
    qk.result = r;
    lineChart($("qk-variance"), $("qk-variance-legend"), [
      { label: "Var(q·k), raw", x: r.dims, y: r.variance_raw, colour: "#d62728" },
      { label: "Var(q·k / √d_k), scaled", x: r.dims, y: r.variance_scaled, colour: "#1f77b4" }],
    { logX: true, logY: true, xLabel: "head width d_k", yLabel: "variance of the score", points: true });
    lineChart($("qk-peak"), $("qk-peak-legend"), [
      { label: "softmax of raw scores", x: r.dims, y: r.peak_raw, colour: "#d62728" },
      { label: "softmax of scaled scores", x: r.dims, y: r.peak_scaled, colour: "#1f77b4" },
      { label: `uniform 1/${r.keys}`, x: r.dims, y: r.dims.map(() => r.uniform), colour: "#7f7f7f", dash: [5, 4] }],
    { logX: true, xLabel: "head width d_k", yLabel: "largest weight (mean)", points: true });
    $("qk-peak-caption").textContent = `largest softmax weight over ${r.keys} keys against d_k (mean of ${r.queries})`;
    qkTable();
    const last = r.dims.length - 1;
    announce(`at d_k ${r.dims[last]}: raw variance ${measure(r.variance_raw[last])}, scaled ` +
      `${measure(r.variance_scaled[last])}`);
  });
}

function qkTable() {
  const r = qk.result;
  const rows = r.dims.map((d, i) => ({ d, raw: r.variance_raw[i], scaled: r.variance_scaled[i], peak: r.peak_raw[i],
    peak_scaled: r.peak_scaled[i] }));
  rankableTable($("qk-table"), { caption: `${r.samples.toLocaleString("en")} seeded pairs per d_k (theory: d_k and 1)`,
    columns: [{ key: "d", label: "d_k", format: count }, { key: "raw", label: "Var(q·k)", format: measure },
      { key: "scaled", label: "Var(q·k / √d_k)", format: measure },
      { key: "peak", label: "largest weight, raw", format: prob },
      { key: "peak_scaled", label: "largest weight, scaled", format: prob }],
    rows, state: qk.sort, onSort: (key, descending) => { qk.sort = { sort: key, descending }; qkTable(); } });
}

function softmax() {
  const temperature = logSlider("softmax-temperature");
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
  const bandwidth = logSlider("mixing-bandwidth");
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
  if (kind === "learned" && $("pos-model").value !== "") params.model = Number($("pos-model").value);
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
  $("pos-model").disabled = !learned || !positions.withTable.length;
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
    refpatch: positions.at.join("."), pmodel: params.kind === "learned" ? params.model : null });
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
    matrixCursor.layout(n, 1, rowHit(positions.matrixBox, n));
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
  drawOverlay($("pos-matrix"), (s) => paintRowColumn(s, positions.matrixBox, n, on));
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

function dotsRefresh() {
  const scale = logSlider("dots-scale");
  const size = Number($("dots-positions").value);
  const dim = Number($("dots-dim").value);
  $("dots-positions-value").textContent = size;
  const reference = Math.min(dots.reference, size - 1);
  remember({ fs: scale === 1 ? null : scale, n1d: size === 32 ? null : size, d1d: dim === 64 ? null : dim,
    ref1d: reference || null });
  runDots(() => getJSON("/api/mechanics/position-dots", { positions: size, dim, scale, reference }), (r) => {
    dots.result = r;
    dots.reference = r.reference;
    dots.values = Object.fromEntries(Object.keys(DOT_KINDS).map((kind) => [kind, decode(r.kinds[kind].dots).data]));
    const n = r.positions;
    const scaleSpec = { lo: -r.magnitude, hi: r.magnitude, map: "diverging" };
    for (const [kind, name] of Object.entries(DOT_KINDS)) {
      const canvas = $(`dots-${kind}`);
      dots.boxes[kind] = fitBox(surface(canvas), n, n);
      drawHeat(canvas, dots.values[kind], n, n, scaleSpec, { box: dots.boxes[kind] });
      dotCursors[kind].layout(n, 1, rowHit(dots.boxes[kind], n), r.reference);
      colourBar($(`dots-${kind}-scale`), scaleSpec, "dot product pᵢ·pⱼ", signed);
      const kindFacts = r.kinds[kind];
      describe(canvas, `${name} positions: dot products of all ${n} × ${n} pairs, self ${signed(kindFacts.self)}, ` +
        `neighbours ${signed(kindFacts.neighbours)}, all pairs ${signed(kindFacts.all_pairs)}`);
    }
    const x = Array.from({ length: n }, (_, j) => j);
    lineChart($("dots-row"), $("dots-legend"), Object.entries(DOT_KINDS).map(([kind, label]) =>
      ({ label, x, y: Array.from(decode(r.kinds[kind].row).data) })),
    { xLabel: "position j", yLabel: "dot product" });
    $("dots-row-caption").textContent = `dot products with position ${r.reference}`;
    const both = (key) => Object.keys(DOT_KINDS).map((kind) => signed(r.kinds[kind][key])).join(" · ");
    facts($("dots-facts"), [["positions", `${n}, width ${r.dim}, frequency scale ${r.scale}`],
      ["squared length pᵢ·pᵢ, sinusoidal · random", both("self")],
      ["mean over neighbours |i − j| = 1", both("neighbours")], ["mean over all pairs i ≠ j", both("all_pairs")]]);
    lightDots(position.get());
    announce(`frequency scale ${r.scale}: neighbours' dot product ${signed(r.kinds.sincos.neighbours)} sinusoidal, ` +
      `${signed(r.kinds.random.neighbours)} random`);
  });
}

// Position `k` lit as its row and column on both heatmaps.
function lightDots(k) {
  const r = dots.result;
  if (!r) return;
  const on = k !== null && k < r.positions ? k : null;
  for (const kind of Object.keys(DOT_KINDS)) {
    drawOverlay($(`dots-${kind}`), (s) => paintRowColumn(s, dots.boxes[kind], r.positions, on));
    $(`dots-${kind}`).dataset.highlight = on ?? "";
  }
}

const dotCursors = Object.fromEntries(Object.keys(DOT_KINDS).map((kind) => [kind, cursor($(`dots-${kind}`), {
  label: "rows of the dot products (Enter charts the row)",
  describe: (k) => {
    const r = dots.result;
    if (!r) return `position ${k}`;
    const value = (name) => signed(dots.values[name][k * r.positions + r.reference]);
    return `position ${k}: with position ${r.reference}, sinusoidal ${value("sincos")}, random ${value("random")}`;
  },
  onMove: position.set,
  onPick: (k) => { dots.reference = k; dotsRefresh(); },
})]));
position.on(lightDots);

const isCentre = (r) => r.query === Math.floor(r.grid / 2) * r.grid + Math.floor(r.grid / 2);

function localRefresh() {
  const sigma = logSlider("local-sigma");
  const grid = Number($("local-grid").value);
  $("local-grid-value").textContent = `${grid} × ${grid}`;
  $("local-grid").setAttribute("aria-valuetext", `${grid} by ${grid}`);
  const at = local.at ? local.at.map((v) => Math.min(v, grid - 1)) : null;
  remember({ sigma: sigma === 2 ? null : sigma, lgrid: grid === 14 ? null : grid, lq: at ? at.join(".") : null });
  runLocal(() => getJSON("/api/mechanics/local", { grid, sigma, query: at ? at[0] * grid + at[1] : null }), (r) => {
    local.result = r;
    local.weights = decode(r.weights).data;
    const g = r.grid;
    const scale = { lo: 0, hi: $("local-auto").checked ? r.max : 1, map: "viridis" };
    const canvas = $("local-map");
    const s = surface(canvas);
    local.box = fitBox(s, g, g);
    paintHeat(s, local.weights, g, g, scale, { box: local.box });
    paintOutline(s, local.box, g, g, r.query);
    localCursor.layout(g * g, g, gridHit(local.box, g, g), r.query);
    colourBar($("local-scale"), scale, "attention weight", prob);
    const [row, col] = [Math.floor(r.query / g), r.query % g];
    const where = `${isCentre(r) ? "the centre patch" : "patch"} (${row}, ${col})`;
    $("local-caption").textContent = `synthetic local attention from ${where}, σ = ${r.sigma}`;
    facts($("local-facts"), [["query", `${where} of a ${g} × ${g} grid`], ["weight on the query", prob(r.at_query)],
      ["largest weight", prob(r.max)], ["uniform weight 1/N", prob(r.uniform)],
      ["patches it effectively averages, exp(entropy)", measure(r.reach)],
      ["root-mean-square distance of the weights (patches)", measure(r.rms_distance)],
      ["sum of the weights", prob(r.sum)]]);
    lightLocal(cell.get());
    announce(`query ${where}, sigma ${r.sigma}: it effectively averages ${measure(r.reach)} patches`);
  });
}

function lightLocal(k) {
  const r = local.result;
  if (!r) return;
  const on = k !== null && k < r.grid * r.grid ? k : null;
  drawOverlay($("local-map"), (s) => paintHighlight(s, local.box, r.grid, r.grid, on));
  $("local-map").dataset.highlight = on ?? "";
}

const localCursor = cursor($("local-map"), { label: "query patch (Enter makes it the query)",
  describe: (k) => {
    const r = local.result;
    if (!r) return `patch ${k}`;
    return `patch (${Math.floor(k / r.grid)}, ${k % r.grid}): weight ${prob(local.weights[k])}`;
  },
  onMove: cell.set,
  onPick: (k) => {
    const g = local.result.grid;
    local.at = [Math.floor(k / g), k % g];
    localRefresh();
  } });
cell.on(lightLocal);

// The settings in the URL, applied once when the page starts.
function fromURL() {
  const number = (name) => Number(setting(name));
  if (number("st") > 0) logs["softmax-temperature"].set(number("st"));
  if (number("bw") > 0) logs["mixing-bandwidth"].set(number("bw"));
  if ([...$("qk-keys").options].some((o) => o.value === setting("qkeys"))) $("qk-keys").value = setting("qkeys");
  const kind = setting("kind");
  if ([...$("pos-kind").options].some((o) => o.value === kind && !o.disabled)) $("pos-kind").value = kind;
  if (number("grid") >= 2) $("pos-grid").value = number("grid");
  if ([...$("pos-dim").options].some((o) => o.value === setting("dim"))) $("pos-dim").value = setting("dim");
  if (number("base") >= 10) $("pos-base").value = Math.log10(number("base"));
  const at = (setting("refpatch") || "").split(".").map(Number);
  if (at.length === 2 && at.every((v) => Number.isInteger(v) && v >= 0)) positions.at = at;
  if (number("fs") > 0) logs["dots-scale"].set(number("fs"));
  if (number("n1d") >= 8) $("dots-positions").value = number("n1d");
  if ([...$("dots-dim").options].some((o) => o.value === setting("d1d"))) $("dots-dim").value = setting("d1d");
  if (Number.isInteger(number("ref1d")) && number("ref1d") > 0) dots.reference = number("ref1d");
  if (number("sigma") > 0) logs["local-sigma"].set(number("sigma"));
  if (number("lgrid") >= 4) $("local-grid").value = number("lgrid");
  const query = (setting("lq") || "").split(".").map(Number);
  if (query.length === 2 && query.every((v) => Number.isInteger(v) && v >= 0)) local.at = query;
}

export function initMechanics(info) {
  positions.models = info.models;
  positions.withTable = info.models.filter((m) => m.absolute_positions);
  for (const [id, [digits, words]] of Object.entries(LOG_SLIDERS)) logs[id] = logControl($(id), { digits, words });
  for (const kind of info.position_kinds) {
    const needsModel = kind === "learned" && !positions.withTable.length;
    const option = new Option(needsModel ? `${kind} (needs a checkpoint with a position table)` : kind, kind);
    option.disabled = needsModel;
    $("pos-kind").append(option);
  }
  // Only the models with a table of absolute positions: a CNN, or a ViT with rotary positions, has none to show.
  const labels = modelLabels(info.models);
  for (const model of positions.withTable) {
    const option = new Option(labels[model.index], model.index);
    option.title = model.file;
    $("pos-model").append(option);
  }
  const first = startingModel(info.models, "positions", setting("pmodel"));
  if (first) $("pos-model").value = first.index;
  fromURL();
  $("softmax-temperature").addEventListener("input", softmax);
  $("softmax-auto").addEventListener("change", softmax);
  $("qk-keys").addEventListener("change", qkRefresh);
  $("mixing-bandwidth").addEventListener("input", mixing);
  $("mixing-auto").addEventListener("change", mixing);
  for (const id of ["pos-kind", "pos-grid", "pos-dim", "pos-base", "pos-model", "pos-auto"]) {
    $(id).addEventListener("input", positionsRefresh);
  }
  for (const id of ["dots-scale", "dots-positions", "dots-dim"]) $(id).addEventListener("input", dotsRefresh);
  for (const id of ["local-sigma", "local-grid"]) $(id).addEventListener("input", localRefresh);
  $("local-auto").addEventListener("change", localRefresh);
  softmax();
  qkRefresh();
  mixing();
  positionsRefresh();
  dotsRefresh();
  localRefresh();
}
