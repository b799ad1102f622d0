// Mechanics page: softmax with temperature, token mixing with a bandwidth, and the geometry of
// position encodings, each drawn from the server's numbers.
import { $, decode, fmt, getJSON, latest } from "./api.js";
import { cellAt, drawBars, drawHeat, drawLines, fitBox, outlineCell } from "./draw.js";

const page = $("page-mechanics");
const error = $("mechanics-error");
const runSoftmax = latest(page, error);
const runMixing = latest(page, error);
const runPositions = latest(page, error);
const positions = { reference: 0, result: null, box: null };

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

const logSlider = (id, digits) => Number((10 ** Number($(id).value)).toFixed(digits));

function softmax() {
  const temperature = logSlider("softmax-temperature", 3);
  $("softmax-temperature-value").textContent = temperature;
  runSoftmax(() => getJSON("/api/mechanics/softmax", { temperature }), (r) => {
    const scores = Array.from(decode(r.scores).data), weights = Array.from(decode(r.weights).data);
    const labels = scores.map((_, i) => String(i));
    drawBars($("softmax-scores"), scores, { labels });
    drawBars($("softmax-weights"), weights, { line: r.uniform, lineLabel: `1/N = ${fmt(r.uniform, 4)}`, labels });
    facts($("softmax-facts"), [["keys N", fmt(r.keys)], ["largest weight", fmt(r.stats.max, 4)],
      ["spread (max − min)", fmt(r.stats.spread, 4)], ["entropy (nats)", fmt(r.stats.entropy, 4)],
      ["distance from uniform", fmt(r.stats.uniform_distance, 4)]]);
  });
}

function mixing() {
  const bandwidth = logSlider("mixing-bandwidth", 3);
  $("mixing-bandwidth-value").textContent = bandwidth;
  runMixing(() => getJSON("/api/mechanics/mixing", { bandwidth }), (r) => {
    const matrix = decode(r.matrix);
    const canvas = $("mixing-matrix");
    canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
    drawHeat(canvas, matrix.data, r.tokens, r.tokens, 0, r.matrix_max);
    const x = Array.from({ length: r.tokens }, (_, i) => i);
    drawLines($("mixing-signal"), [
      { label: "values v", x, y: Array.from(decode(r.values).data), colour: "#98a1b0" },
      { label: "mixed y = A v", x, y: Array.from(decode(r.mixed).data), colour: "#3b5bdb" }],
    { xLabel: "token", yLabel: "value", points: true });
    facts($("mixing-facts"), [["tokens", fmt(r.tokens)], ["largest weight in A", fmt(r.matrix_max, 4)],
      ["tokens each output averages, exp(entropy), mean over rows", fmt(r.mean_reach, 2)],
      ["row sums (min … max)", `${fmt(r.row_sum_range[0], 6)} … ${fmt(r.row_sum_range[1], 6)}`]]);
  });
}

function positionParams() {
  const kind = $("pos-kind").value;
  const params = { kind, grid: Number($("pos-grid").value), dim: Number($("pos-dim").value),
    base: Number((10 ** Number($("pos-base").value)).toFixed(1)), reference: positions.reference };
  if (kind === "learned") params.model = $("pos-model").value;
  return params;
}

function positionsRefresh() {
  const params = positionParams();
  $("pos-grid-value").textContent = params.grid;
  $("pos-base-value").textContent = params.base;
  const learned = params.kind === "learned";
  for (const id of ["pos-grid", "pos-dim"]) $(id).disabled = learned;
  $("pos-base").disabled = params.kind !== "sincos";
  $("pos-model").disabled = !learned;
  runPositions(() => getJSON("/api/mechanics/positions", params), (r) => {
    positions.result = r;
    const [gh, gw] = r.grid;
    const map = $("pos-map");
    map.getContext("2d").clearRect(0, 0, map.width, map.height);
    const [lo, hi] = r.range;
    positions.box = drawHeat(map, decode(r.reference_map).data, gh, gw, lo, hi);
    outlineCell(map, positions.box, gh, gw, r.reference, "#111");
    const matrix = $("pos-matrix");
    matrix.getContext("2d").clearRect(0, 0, matrix.width, matrix.height);
    drawHeat(matrix, decode(r.similarity).data, gh * gw, gh * gw, lo, hi, { box: fitBox(matrix, gh * gw, gh * gw) });
    $("pos-ref-caption").textContent = `similarity to patch ${r.reference}, colour ${fmt(lo, 3)} … ${fmt(hi, 3)}`;
    facts($("pos-facts"), [["positions", `${gh} × ${gw} grid, width ${r.dim}`],
      ["mean similarity of adjacent patches", fmt(r.adjacent, 4)], ["mean over all pairs", fmt(r.all_pairs, 4)]]);
  });
}

export function initMechanics(info) {
  for (const kind of info.position_kinds) $("pos-kind").append(new Option(kind, kind));
  info.models.forEach((m, i) => $("pos-model").append(new Option(`${m.model} (${m.pos_embed})`, i)));
  $("softmax-temperature").addEventListener("input", softmax);
  $("mixing-bandwidth").addEventListener("input", mixing);
  for (const id of ["pos-kind", "pos-grid", "pos-dim", "pos-base", "pos-model"]) {
    $(id).addEventListener("input", () => { positions.reference = 0; positionsRefresh(); });
  }
  $("pos-map").classList.add("clickable");
  $("pos-map").addEventListener("click", (event) => {
    if (!positions.result) return;
    const [gh, gw] = positions.result.grid;
    const cell = cellAt(event, $("pos-map"), positions.box, gh, gw);
    if (cell >= 0) { positions.reference = cell; positionsRefresh(); }
  });
  softmax();
  mixing();
  positionsRefresh();
}
