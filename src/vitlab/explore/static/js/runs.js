// Runs page: the overview of every run and one run's table, each ranked by the clicked column on
// the server (which also gives the extremes and bar lengths); learning curves; the report's figures.
import { $, fmt, getJSON, latest } from "./api.js";
import { drawLines } from "./draw.js";

const page = $("page-runs");
const runOverview = latest(page, $("runs-error"));
const runDetail = latest($("run-detail"), $("runs-error"));
const state = { overview: { sort: null, descending: null }, detail: { sort: null, descending: null }, selected: null };

function renderTable(table, ranked, onSort, onRow = null) {
  table.replaceChildren();
  const caption = table.createCaption();
  const sorted = ranked.sort.by;
  const ex = ranked.extremes;
  caption.textContent = `ranked by ${ranked.columns.find((c) => c.key === sorted).label}, ` +
    `${ranked.sort.descending ? "highest" : "lowest"} first` +
    (ex ? ` · highest ${fmt(ex.max.value)} (${ex.max.row}) · lowest ${fmt(ex.min.value)} (${ex.min.row})` : "");
  const head = table.createTHead().insertRow();
  for (const column of ranked.columns) {
    const th = document.createElement("th");
    th.textContent = column.key === sorted ? `${column.label} ${ranked.sort.descending ? "▼" : "▲"}` : column.label;
    th.dataset.key = column.key;
    th.classList.toggle("sorted", column.key === sorted);
    th.addEventListener("click", () => onSort(column.key, column.key === sorted ? !ranked.sort.descending : null));
    head.append(th);
  }
  const body = table.createTBody();
  for (const row of ranked.rows) {
    const tr = body.insertRow();
    tr.dataset.rank = row.rank;
    tr.dataset.label = row.values[ranked.label];
    for (const column of ranked.columns) {
      const td = tr.insertCell();
      const value = row.values[column.key];
      if (typeof value !== "number") td.classList.add("text");
      if (column.key === sorted && row.bar !== null) {
        td.classList.add("ranked");
        const fill = document.createElement("div");
        fill.className = "fill";
        fill.style.width = `${100 * row.bar}%`;
        const text = document.createElement("span");
        text.textContent = fmt(value);
        td.append(fill, text);
        if (ex && (value === ex.max.value || value === ex.min.value)) td.classList.add("extreme");
      } else {
        td.textContent = fmt(value);
      }
    }
    if (onRow) {
      tr.classList.add("clickable");
      tr.classList.toggle("selected", row.values[ranked.label] === state.selected);
      tr.addEventListener("click", () => onRow(row.values[ranked.label]));
    }
  }
}

function drawDetail(detail) {
  $("run-detail").hidden = false;
  $("run-title").textContent = `${detail.name} (${detail.kind})`;
  const conclusions = $("run-conclusions");
  conclusions.replaceChildren();
  for (const sentence of detail.facts.conclusions || []) {
    const li = document.createElement("li");
    li.textContent = sentence;
    conclusions.append(li);
  }
  renderTable($("run-table"), detail.table, (key, descending) => {
    state.detail = { sort: key, descending };
    openRun(state.selected);
  });
  const curves = $("run-curves");
  curves.replaceChildren();
  for (const panel of detail.curves) {
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = panel.title;
    const canvas = document.createElement("canvas");
    canvas.width = 460; canvas.height = 260;
    figure.append(caption, canvas);
    curves.append(figure);
    drawLines(canvas, panel.series, { xLabel: "epoch", yLabel: panel.title, points: true });
  }
  const figures = $("run-figures");
  figures.replaceChildren();
  for (const name of detail.figures) {
    const figure = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = name;
    const img = document.createElement("img");
    img.alt = name;
    img.src = `/api/runs/${encodeURIComponent(detail.name)}/figures/${encodeURIComponent(name)}`;
    figure.append(caption, img);
    figures.append(figure);
  }
  $("run-report").textContent = detail.report || "(no report.md in this run)";
}

function openRun(name) {
  state.selected = name;
  for (const tr of $("runs-table").querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.dataset.label === name);
  runDetail(() => getJSON(`/api/runs/${encodeURIComponent(name)}`, { sort: state.detail.sort, descending: state.detail.descending }),
    drawDetail);
}

function refreshOverview(openFirst = true) {
  runOverview(() => getJSON("/api/runs", { sort: state.overview.sort, descending: state.overview.descending }), (answer) => {
    $("runs-roots").textContent = answer.roots.length
      ? `Run folders from: ${answer.roots.join(", ")} — ${answer.runs.length} run(s).`
      : "No run folders: start `vitlab explore --runs DIR` (the folder `vitlab compare` or `vitlab train` wrote into).";
    renderTable($("runs-table"), answer.table, (key, descending) => {
      state.overview = { sort: key, descending };
      refreshOverview(false);
    }, (name) => { state.detail = { sort: null, descending: null }; openRun(name); });
    if (openFirst && answer.runs.length && state.selected === null) openRun(answer.table.rows[0].values.run);
  });
}

export function initRuns() {
  refreshOverview();
}
