// Runs page: a training to start and watch; the overview of every run and one run's table, each ranked by the
// chosen column on the server (which also gives the extremes and bar lengths, measured from zero); learning
// curves; the report's figures; a link from a trained run to its checkpoint on the Attention page when the
// explorer loaded it, and from a promptable run to the Segment page. The ranking is kept in the URL.
import { $, announce, getJSON, latest } from "./api.js";
import { addModel, openModel } from "./attention.js";
import { initTraining } from "./training.js";
import { openPromptRun } from "./segment.js";
import { lineChart, makeCanvas } from "./draw.js";
import { column } from "./format.js";
import { remember, setting } from "./state.js";

const runOverview = latest($("page-runs"), $("runs-error"));
const runDetail = latest($("run-detail"), $("run-error"));
const state = { overview: { sort: null, descending: null }, detail: { sort: null, descending: null }, selected: null,
  info: null, roots: [] };

function renderTable(table, ranked, onSort, onRow = null) {
  table.replaceChildren();
  const caption = table.createCaption();
  const sorted = ranked.sort.by;
  const ex = ranked.extremes;
  caption.textContent = `ranked by ${ranked.columns.find((c) => c.key === sorted).label}, ` +
    `${ranked.sort.descending ? "highest" : "lowest"} first` +
    (ex ? ` · highest ${column(sorted, ex.max.value)} (${ex.max.row})` +
      ` · lowest ${column(sorted, ex.min.value)} (${ex.min.row})` : "");
  const head = table.createTHead().insertRow();
  for (const col of ranked.columns) {
    const th = document.createElement("th");
    th.scope = "col";
    th.dataset.key = col.key;
    th.classList.toggle("sorted", col.key === sorted);
    th.classList.toggle("text", ranked.rows.some((r) => typeof r.values[col.key] === "string"));
    if (col.key === sorted) th.setAttribute("aria-sort", ranked.sort.descending ? "descending" : "ascending");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    button.textContent = col.key === sorted ? `${col.label} ${ranked.sort.descending ? "▼" : "▲"}` : col.label;
    button.setAttribute("aria-label", `rank by ${col.label}`);
    th.append(button);
    th.addEventListener("click", () => onSort(col.key, col.key === sorted ? !ranked.sort.descending : null));
    head.append(th);
  }
  const body = table.createTBody();
  for (const row of ranked.rows) {
    const tr = body.insertRow();
    tr.dataset.rank = row.rank;
    tr.dataset.label = row.values[ranked.label];
    const broken = row.values.broken;          // a run whose files cannot be read: its reason, across the row
    for (const col of broken ? ranked.columns.slice(0, 2) : ranked.columns) {
      const td = tr.insertCell();
      const value = row.values[col.key];
      if (typeof value !== "number") td.classList.add("text");
      if (onRow && col.key === ranked.label) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "link";
        button.textContent = value;
        button.setAttribute("aria-label", `open run ${value}`);
        td.append(button);
      } else if (col.key === sorted && row.bar !== null) {
        td.classList.add("ranked");
        const fill = document.createElement("div");
        fill.className = "fill";
        fill.style.width = `${100 * row.bar}%`;
        const text = document.createElement("span");
        text.textContent = column(col.key, value);
        td.append(fill, text);
        if (ex && (value === ex.max.value || value === ex.min.value)) td.classList.add("extreme");
      } else {
        td.textContent = column(col.key, value);
      }
    }
    if (broken) {
      const td = tr.insertCell();
      td.colSpan = ranked.columns.length - 2;
      td.className = "text broken";
      td.textContent = `cannot be read: ${broken}`;
    }
    if (onRow) {
      tr.classList.add("clickable");
      tr.classList.toggle("selected", row.values[ranked.label] === state.selected);
      tr.addEventListener("click", () => onRow(row.values[ranked.label]));
    }
  }
}

// The loaded checkpoint that is this run's (given as the run folder or a file inside it), or -1. A run is
// the folder NAME under a root, or a root itself.
function checkpointOf(name) {
  const trim = (path) => path.replace(/\/+$/, "");
  const folders = state.roots.map(trim)
    .flatMap((root) => [`${root}/${name}`, ...(root.split("/").pop() === name ? [root] : [])]);
  return state.info.models.findIndex((m) => folders.some((f) => trim(m.file) === f || m.file.startsWith(`${f}/`)));
}

function drawLinks(detail) {
  const links = $("run-links");
  links.replaceChildren();
  const a = document.createElement("a");
  if (detail.facts.task === "promptable") {
    a.href = `#segment?prun=${encodeURIComponent(detail.name)}`;
    a.textContent = "Prompt it on the Segment page";
    a.addEventListener("click", () => openPromptRun(detail.name));
    links.append(a);
    return;
  }
  const index = detail.kind === "train" ? checkpointOf(detail.name) : -1;
  if (index < 0) return;
  a.href = `#attention?model=${index}`;
  a.textContent = "Open its checkpoint on the Attention page";
  a.addEventListener("click", () => openModel(index));
  links.append(a);
}

function drawDetail(detail) {
  $("run-detail").hidden = false;
  $("run-title").textContent = `${detail.name} (${detail.kind})`;
  drawLinks(detail);
  const conclusions = $("run-conclusions");
  conclusions.replaceChildren();
  for (const sentence of detail.facts.conclusions || []) {
    const li = document.createElement("li");
    li.textContent = sentence;
    conclusions.append(li);
  }
  renderTable($("run-table"), detail.table, (key, descending) => {
    state.detail = { sort: key, descending };
    remember({ dsort: key, ddesc: descending === null ? null : Number(descending) });
    openRun(state.selected);
  });
  const curves = $("run-curves");
  curves.replaceChildren();
  for (const panel of detail.curves) {
    const figure = document.createElement("figure");
    figure.className = "chart";
    const caption = document.createElement("figcaption");
    caption.textContent = panel.title;
    const body = document.createElement("div");
    body.className = "chart-body";
    const canvas = makeCanvas(460, 260);
    const legend = document.createElement("ul");
    legend.className = "legend";
    body.append(canvas, legend);
    figure.append(caption, body);
    curves.append(figure);
    lineChart(canvas, legend, panel.series, { xLabel: "epoch", yLabel: panel.title, points: true });
  }
  const figures = $("run-figures");
  figures.replaceChildren();
  for (const name of detail.figures) {
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = name;
    const img = document.createElement("img");
    img.alt = `figure ${name} of run ${detail.name}`;
    img.src = `/api/runs/${encodeURIComponent(detail.name)}/figures/${encodeURIComponent(name)}`;
    figure.append(caption, img);
    figures.append(figure);
  }
  $("run-report").textContent = detail.report || "(no report.md in this run)";
  announce(`run ${detail.name} opened`);
}

function openRun(name) {
  state.selected = name;
  remember({ run: name });
  for (const tr of $("runs-table").querySelectorAll("tbody tr")) {
    tr.classList.toggle("selected", tr.dataset.label === name);
  }
  const { sort, descending } = state.detail;
  runDetail(() => getJSON(`/api/runs/${encodeURIComponent(name)}`, { sort, descending }), drawDetail);
}

function refreshOverview(openFirst = true) {
  const { sort, descending } = state.overview;
  runOverview(() => getJSON("/api/runs", { sort, descending }), (answer) => {
    state.roots = answer.roots;
    $("runs-roots").textContent = answer.roots.length
      ? `Run folders from: ${answer.roots.join(", ")} — ${answer.runs.length} run(s).`
      : "No run folders: start `vitlab explore --runs DIR` (the folder `vitlab compare` or `vitlab train` wrote into).";
    renderTable($("runs-table"), answer.table, (key, descending) => {
      state.overview = { sort: key, descending };
      remember({ rsort: key, rdesc: descending === null ? null : Number(descending) });
      refreshOverview(false);
    }, (name) => {
      state.detail = { sort: null, descending: null };
      remember({ dsort: null, ddesc: null });
      openRun(name);
    });
    if (openFirst && answer.runs.length && (state.selected === null || !answer.runs.some((r) => r.name === state.selected))) {
      const wanted = setting("run");
      const names = answer.table.rows.map((r) => r.values.run);
      openRun(names.includes(wanted) ? wanted : names[0]);
    }
  });
}

// A ranking from the URL: the column and, when given, its direction (1 descending, 0 ascending).
function ranking(sortName, descName) {
  const desc = setting(descName);
  return { sort: setting(sortName), descending: desc === "1" ? true : desc === "0" ? false : null };
}

// A watched training ended: list it, open it, and offer its model on the Attention page.
async function trained(end) {
  if (end.model_index !== null && end.model_index !== undefined) {
    const fresh = await getJSON("/api/info");
    state.info.models.splice(0, state.info.models.length, ...fresh.models);
    addModel(fresh.models[end.model_index], state.info.models);
  }
  state.selected = null;
  remember({ run: end.name });
  refreshOverview();
}

export function initRuns(info) {
  state.info = info;
  state.overview = ranking("rsort", "rdesc");
  state.detail = ranking("dsort", "ddesc");
  refreshOverview();
  initTraining(info, trained);
}
