// Linked views and keyboard use of the figures.
//
// A `link` holds the item (a patch, a token, a key) that the pointer or the keyboard is on; every view of
// the page that shows that item registers to light it up. A `cursor` makes a drawn figure one control
// (role slider over its items): the pointer hovering an item or the arrow keys move the link, a click,
// Enter or Space picks the item. Each view states the item it lights in data-highlight.

export function link() {
  const views = [];
  let current = null;
  return {
    on(view) { views.push(view); },
    set(index) {
      if (index === current) return;
      current = index;
      for (const view of views) view(index);
    },
    get() { return current; },
  };
}

// The item under a pointer event on `canvas`, in the canvas's CSS pixels, by `hit(x, y) -> index or -1`.
export function itemAt(event, canvas, hit) {
  const rect = canvas.getBoundingClientRect();
  const x = ((event.clientX - rect.left) * Number(canvas.dataset.width)) / rect.width;
  const y = ((event.clientY - rect.top) * Number(canvas.dataset.height)) / rect.height;
  return hit(x, y);
}

// The cell of a rows x cols grid over `box` at (x, y), or -1.
export function gridHit(box, rows, cols) {
  return (x, y) => {
    const u = x - box.x, v = y - box.y;
    if (u < 0 || v < 0 || u >= box.w || v >= box.h) return -1;
    return Math.floor((v / box.h) * rows) * cols + Math.floor((u / box.w) * cols);
  };
}

// `canvas` as a control over `count` items laid out in rows of `cols` (set by `layout`).
// label: its accessible name; describe(i): the item's words (aria-valuetext); onMove(i or null): the
// pointer or keyboard is on item i (null: left); onPick(i): the item was chosen.
export function cursor(canvas, { label, describe, onMove, onPick = null }) {
  const state = { count: 0, cols: 1, hit: () => -1, at: 0 };
  canvas.tabIndex = 0;
  canvas.setAttribute("role", "slider");
  canvas.setAttribute("aria-label", label);
  canvas.classList.add("control");
  const show = (index) => {
    state.at = index;
    canvas.setAttribute("aria-valuenow", index);
    canvas.setAttribute("aria-valuetext", describe(index));
  };
  canvas.addEventListener("pointermove", (event) => {
    const index = itemAt(event, canvas, state.hit);
    if (index >= 0) show(index);
    onMove(index >= 0 ? index : null);
  });
  canvas.addEventListener("pointerleave", () => onMove(document.activeElement === canvas ? state.at : null));
  canvas.addEventListener("click", (event) => {
    const index = itemAt(event, canvas, state.hit);
    if (index >= 0 && onPick) { show(index); onPick(index); }
  });
  canvas.addEventListener("focus", () => onMove(state.at));
  canvas.addEventListener("blur", () => onMove(null));
  canvas.addEventListener("keydown", (event) => {
    if (!state.count) return;
    const rows = Math.ceil(state.count / state.cols);
    const page = state.cols * Math.max(1, Math.floor(rows / 4));
    const moves = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -state.cols, ArrowDown: state.cols,
      Home: -state.at, End: state.count - 1 - state.at, PageUp: -page, PageDown: page };
    if (event.key in moves) {
      event.preventDefault();
      show(Math.min(state.count - 1, Math.max(0, state.at + moves[event.key])));
      onMove(state.at);
    } else if ((event.key === "Enter" || event.key === " ") && onPick) {
      event.preventDefault();
      onPick(state.at);
    }
  });
  return {
    layout(count, cols, hit, at = state.at) {
      Object.assign(state, { count, cols, hit });
      canvas.setAttribute("aria-valuemin", 0);
      canvas.setAttribute("aria-valuemax", Math.max(0, count - 1));
      show(Math.min(Math.max(0, at), Math.max(0, count - 1)));
    },
    get at() { return state.at; },
  };
}

// Arrow keys move the focus among `container`'s items (`selector`, laid out in rows of `cols()`): one item
// is in the Tab order at a time (roving tabindex), the one last focused or the current one.
export function arrowKeys(container, selector, cols = () => 1) {
  container.addEventListener("keydown", (event) => {
    const items = [...container.querySelectorAll(selector)];
    const from = items.indexOf(document.activeElement);
    if (from < 0) return;
    const moves = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -cols(), ArrowDown: cols(), Home: -from,
      End: items.length - 1 - from };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const to = Math.min(items.length - 1, Math.max(0, from + moves[event.key]));
    roving(items, to);
    items[to].focus();
  });
}

// Item `index` of `items` in the Tab order, the others reached by the arrow keys.
export function roving(items, index) {
  items.forEach((item, i) => { item.tabIndex = i === index ? 0 : -1; });
}
