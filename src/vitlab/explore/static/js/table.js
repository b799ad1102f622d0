// Tables whose rows the reader ranks by a column: a click (or Enter) on a header sorts by it, again reverses.
// Ordering only: every value comes from the server.

// Fill `table` with `rows` (objects) under `columns` [{key, label, format(value) -> text}], ranked by
// `state.sort` (a key) in `state.descending` order; `onSort(key, descending)` hears a header chosen.
export function rankableTable(table, { caption, columns, rows, state, onSort }) {
  const by = columns.some((c) => c.key === state.sort) ? state.sort : null;
  const numeric = rows.every((r) => typeof r[by] === "number");
  const descending = state.descending ?? numeric;
  const sorted = by === null ? rows : [...rows].sort((a, b) => {
    const x = a[by], y = b[by];
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return descending ? -order : order;
  });
  table.replaceChildren();
  const label = by === null ? "" : `; ranked by ${columns.find((c) => c.key === by).label}, ` +
    `${descending ? "highest" : "lowest"} first`;
  table.createCaption().textContent = `${caption}${label}`;
  const head = table.createTHead().insertRow();
  for (const col of columns) {
    const th = document.createElement("th");
    th.scope = "col";
    th.dataset.key = col.key;
    th.classList.toggle("sorted", col.key === by);
    if (col.key === by) th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    button.textContent = col.key === by ? `${col.label} ${descending ? "▼" : "▲"}` : col.label;
    button.setAttribute("aria-label", `rank by ${col.label}`);
    button.addEventListener("click", () => onSort(col.key, col.key === by ? !descending : null));
    th.append(button);
    head.append(th);
  }
  const body = table.createTBody();
  for (const row of sorted) {
    const tr = body.insertRow();
    for (const col of columns) {
      const td = tr.insertCell();
      td.textContent = col.format ? col.format(row[col.key]) : String(row[col.key]);
      if (typeof row[col.key] !== "number") td.classList.add("text");
    }
  }
}

// A plain table of `rows` (arrays of cell texts) under `headers`, with a caption: a figure's numbers.
export function numbersTable(table, caption, headers, rows) {
  table.replaceChildren();
  table.createCaption().textContent = caption;
  const head = table.createTHead().insertRow();
  for (const text of headers) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = text;
    head.append(th);
  }
  const body = table.createTBody();
  for (const cells of rows) {
    const tr = body.insertRow();
    cells.forEach((text, i) => {
      const cell = i === 0 ? document.createElement("th") : tr.insertCell();
      if (i === 0) { cell.scope = "row"; tr.append(cell); }
      cell.textContent = text;
    });
  }
}
