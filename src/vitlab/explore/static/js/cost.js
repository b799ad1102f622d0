// Cost page: every attention kind of vitlab's cost model against image side, log-log, with a legend
// beside the plot (each entry toggles its line) that names the kinds whose lines coincide.
import { $, announce, getJSON, latest } from "./api.js";
import { lineChart } from "./draw.js";
import { costValue, count } from "./format.js";
import { remember, setting } from "./state.js";

const run = latest($("page-cost"), $("cost-error"));
const UNITS = { entries: "attention entries per head and layer", flops: "forward FLOPs, whole model",
  memory: "score bytes per layer" };
const FIELDS = ["patch", "dim", "heads", "depth", "metric"];

function draw(r) {
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
  const table = $("cost-table");
  table.replaceChildren();
  const caption = table.createCaption();
  caption.textContent = UNITS[metric];
  const head = table.createTHead().insertRow();
  for (const text of ["image", "tokens", ...r.kinds]) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = text;
    head.append(th);
  }
  const body = table.createTBody();
  r.images.forEach((side, i) => {
    const row = body.insertRow();
    const values = r.kinds.map((k) => costValue(metric, r.series[k][metric][i]));
    const cells = [`${side}×${side}`, count(r.tokens[i]), ...values];
    for (const text of cells) row.insertCell().textContent = text;
  });
  announce(`${UNITS[metric]}: ${r.kinds.length} kinds at ${r.images.length} image sizes`);
}

function refresh() {
  const params = Object.fromEntries(["patch", "dim", "heads", "depth"].map((k) => [k, $(`cost-${k}`).value]));
  remember(Object.fromEntries(FIELDS.map((k) => [`cost_${k}`, $(`cost-${k}`).value])));
  run(() => getJSON("/api/cost", params), draw);
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
  refresh();
}
