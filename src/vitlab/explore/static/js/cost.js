// Cost page: every attention kind of vitlab's cost model against image side, log-log, with a legend
// beside the plot (each entry toggles its line) that names the kinds whose lines coincide; its table and the
// texts' token-cost and pair-count tables, each ranked by the column the reader chooses.
import { $, announce, getJSON, latest, setState } from "./api.js";
import { lineChart } from "./draw.js";
import { costValue, count, ratio } from "./format.js";
import { remember, setting } from "./state.js";
import { rankableTable } from "./table.js";

const run = latest($("page-cost"), $("cost-error"));
const runTextbook = latest($("cost-textbook"), $("cost-textbook-error"));
const UNITS = { entries: "attention entries per head and layer", flops: "forward FLOPs, whole model",
  memory: "score bytes per layer" };
const FIELDS = ["patch", "dim", "heads", "depth", "metric"];
const NUMBERS = { dim: "Width D", heads: "Heads", depth: "Depth" };
const sorts = { cost: { sort: null, descending: null }, tokens: { sort: null, descending: null },
  pairs: { sort: null, descending: null } };
let answer = null;
let textbook = null;

function drawTable() {
  const r = answer;
  const metric = $("cost-metric").value;
  const rows = r.images.map((side, i) => ({ image: side, tokens: r.tokens[i],
    ...Object.fromEntries(r.kinds.map((k) => [k, r.series[k][metric][i]])) }));
  rankableTable($("cost-table"), { caption: UNITS[metric], rows, state: sorts.cost,
    columns: [{ key: "image", label: "image", format: (v) => `${v}×${v}` }, { key: "tokens", label: "tokens", format: count },
      ...r.kinds.map((k) => ({ key: k, label: k, format: (v) => costValue(metric, v) }))],
    onSort: (key, descending) => { sorts.cost = { sort: key, descending }; remember({ cost_sort: key }); drawTable(); } });
}

function draw(r) {
  answer = r;
  const metric = $("cost-metric").value;
  const coincide = r.coincide[metric];
  // Coinciding lines are drawn dashed over each other, each with its own dash, so all stay visible.
  const dash = {};
  for (const group of coincide) group.forEach((kind, i) => { if (i > 0) dash[kind] = [2 + 4 * i, 2 + 4 * i]; });
  lineChart($("cost-chart"), $("cost-legend"),
    r.kinds.map((kind) => ({ label: `${kind} attention`, x: r.images, y: r.series[kind][metric], dash: dash[kind] })),
    { logX: true, logY: true, xLabel: `image side (pixels), patch ${r.patch}`, yLabel: UNITS[metric], points: true },
    coincide.map((group) => `${group.join(", ")} coincide here (within ${Math.round(100 * r.coincide_tolerance)}% ` +
      "at every size): their lines are drawn dashed on top of each other."));
  $("cost-caption").textContent = `${UNITS[metric]} against image side, patch ${r.patch} (log-log)`;
  $("cost-kinds").textContent = `Attention kinds in vitlab's cost model: ${r.kinds.join(", ")}.`;
  drawTable();
  announce(`${UNITS[metric]}: ${r.kinds.length} kinds at ${r.images.length} image sizes`);
}

function drawTextbook() {
  const t = textbook;
  rankableTable($("cost-tokens"), { caption: "the texts' token-cost table", rows: t.cost, state: sorts.tokens,
    columns: [{ key: "image", label: "image", format: (v) => `${v}×${v}` }, { key: "patch", label: "patch P", format: count },
      { key: "tokens", label: "tokens N", format: count }, { key: "entries", label: "entries N²", format: count },
      { key: "ratio", label: "× the first row", format: ratio }],
    onSort: (key, descending) => { sorts.tokens = { sort: key, descending }; drawTextbook(); } });
  rankableTable($("cost-pairs"), { caption: "token pairs one layer mixes", rows: t.pairs, state: sorts.pairs,
    columns: [{ key: "image", label: "image", format: (v) => `${v}×${v}` }, { key: "patch", label: "patch P", format: count },
      { key: "grid", label: "grid" }, { key: "tokens", label: "tokens N", format: count },
      { key: "conv3x3", label: "3×3 convolution", format: count }, { key: "interior_9n", label: "9N", format: count },
      { key: "attention", label: "attention N²", format: count },
      { key: "attention_per_conv", label: "attention ÷ convolution", format: ratio }],
    onSort: (key, descending) => { sorts.pairs = { sort: key, descending }; drawTextbook(); } });
}

// The number fields' values, or null with the reason shown beside them: an empty or out-of-range field is never
// replaced by a default.
function fields() {
  const params = { patch: $("cost-patch").value };
  for (const [key, label] of Object.entries(NUMBERS)) {
    const input = $(`cost-${key}`);
    const value = input.value.trim();
    if (value === "" || !input.checkValidity() || !Number.isInteger(Number(value))) {
      $("cost-error").textContent = `${label}: enter a whole number from ${input.min} to ${input.max}` +
        (input.step && input.step !== "1" ? ` in steps of ${input.step}` : "") + ` (it is ${value || "empty"})`;
      setState($("page-cost"), "error");
      return null;
    }
    params[key] = Number(value);
  }
  return params;
}

function refresh() {
  remember(Object.fromEntries(FIELDS.map((k) => [`cost_${k}`, $(`cost-${k}`).value])));
  const params = fields();
  if (params) run(() => getJSON("/api/cost", params), draw);
}

export function initCost() {
  for (const field of FIELDS) {
    const value = setting(`cost_${field}`);
    const control = $(`cost-${field}`);
    if (value !== null && (control.tagName !== "SELECT" || [...control.options].some((o) => o.value === value))) {
      control.value = value;
    }
    control.addEventListener("change", refresh);
  }
  sorts.cost.sort = setting("cost_sort");
  refresh();
  runTextbook(() => getJSON("/api/cost/textbook"), (t) => { textbook = t; drawTextbook(); });
}
