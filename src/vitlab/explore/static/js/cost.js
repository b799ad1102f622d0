// Cost page: every attention kind of vitlab's cost model against image side, log-log.
import { $, fmt, getJSON, latest } from "./api.js";
import { drawLines } from "./draw.js";

const page = $("page-cost");
const run = latest(page, $("cost-error"));
const UNITS = { entries: "attention entries per head and layer", flops: "forward FLOPs", memory: "score bytes per layer" };

function draw(r) {
  const metric = $("cost-metric").value;
  drawLines($("cost-chart"), r.kinds.map((kind) => ({ label: `${kind} attention`, x: r.images, y: r.series[kind][metric] })),
    { logX: true, logY: true, xLabel: `image side (pixels), patch ${r.patch}`, yLabel: UNITS[metric], points: true });
  $("cost-kinds").textContent = `Attention kinds in vitlab's cost model: ${r.kinds.join(", ")}.` +
    (r.kinds.length < 2 ? " Other kinds (windowed, linear) appear here once the cost model registers them." : "");
  const table = $("cost-table");
  table.replaceChildren();
  const head = table.insertRow();
  for (const text of ["image", "tokens", ...r.kinds.map((k) => `${k}: ${metric}`)]) {
    const th = document.createElement("th");
    th.textContent = text;
    head.append(th);
  }
  r.images.forEach((side, i) => {
    const row = table.insertRow();
    const cells = [`${side}×${side}`, fmt(r.tokens[i]), ...r.kinds.map((k) => fmt(r.series[k][metric][i]))];
    for (const text of cells) row.insertCell().textContent = text;
  });
}

function refresh() {
  const params = Object.fromEntries(["patch", "dim", "heads", "depth"].map((k) => [k, $(`cost-${k}`).value]));
  run(() => getJSON("/api/cost", params), draw);
}

export function initCost() {
  for (const id of ["cost-patch", "cost-dim", "cost-heads", "cost-depth", "cost-metric"]) $(id).addEventListener("change", refresh);
  refresh();
}
