// Canvas drawing: images, heatmaps and their colour bars, bars, line charts with their legends beside
// the plot, and overlays for linked highlights. Drawing only: every value is given.
//
// A canvas is drawn in CSS pixels (its width and height attributes as first written, kept in
// data-width and data-height) on a backing store devicePixelRatio times larger, so it is crisp on any
// screen; CSS shrinks it with the page (max-width: 100%) and keeps its aspect.
import { measure } from "./format.js";

const MAPS = {
  viridis: [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
    [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]],
  // Signed values: blue below zero, white at zero, red above (ColorBrewer RdBu).
  diverging: [[33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
    [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43]],
  grey: [[0, 0, 0], [255, 255, 255]],
};
// Twelve colours apart to most eyes (Tableau 10 and two more); past twelve series the dash pattern varies too.
export const SERIES = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf", "#393b79", "#b15928"];
const DASHES = [[], [7, 4], [2, 3], [9, 3, 2, 3]];
const INK = "#5d6675", HIGHLIGHT = "#ff2d55", SELECTED = "#e8590c";
// A mask in blue; a prompt's foreground points green, background points red, its box gold.
const MASK = [30, 144, 255], FOREGROUND = "#00a000", BACKGROUND = "#d00000", BOX = "#ffd700";

function seriesStyle(k) {
  return { colour: SERIES[k % SERIES.length], dash: DASHES[Math.floor(k / SERIES.length) % DASHES.length] };
}

export function colour(t, map = "viridis") {
  const stops = MAPS[map];
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const f = x - i;
  return stops[i].map((c, k) => Math.round(c + f * (stops[i + 1][k] - c)));
}

// The canvas ready to draw on in CSS pixels: {canvas, ctx, w, h}. Cleared unless `clear` is false.
export function surface(canvas, clear = true) {
  if (!canvas.dataset.width) {
    canvas.dataset.width = canvas.getAttribute("width");
    canvas.dataset.height = canvas.getAttribute("height");
  }
  const w = Number(canvas.dataset.width), h = Number(canvas.dataset.height);
  const ratio = window.devicePixelRatio || 1;
  const bw = Math.round(w * ratio), bh = Math.round(h * ratio);
  if (canvas.width !== bw || canvas.height !== bh) { canvas.width = bw; canvas.height = bh; }
  if (!canvas.classList.contains("fluid")) canvas.style.width = `${w}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(bw / w, 0, 0, bh / h, 0, 0);
  ctx.imageSmoothingEnabled = false;
  if (clear) ctx.clearRect(0, 0, w, h);
  return { canvas, ctx, w, h };
}

// A chart's surface: as wide as it was first made, or as the room its page has if that is less, so its
// text keeps its size on a narrow screen (a chart is redrawn narrower, not shrunk).
function chartSurface(canvas) {
  if (!canvas.dataset.fullWidth) canvas.dataset.fullWidth = canvas.dataset.width || canvas.getAttribute("width");
  if (!canvas.dataset.height) canvas.dataset.height = canvas.getAttribute("height");
  const room = canvas.closest(".page")?.clientWidth || Infinity;
  canvas.dataset.width = Math.min(Number(canvas.dataset.fullWidth), Math.max(200, Math.floor(room - 4)));
  return surface(canvas);
}

// A new canvas of `width` x `height` CSS pixels; with a `label` it is an image with that text alternative.
export function makeCanvas(width, height, label = null) {
  const canvas = document.createElement("canvas");
  canvas.width = width; canvas.height = height;
  canvas.dataset.width = width; canvas.dataset.height = height;
  if (label) describe(canvas, label);
  return canvas;
}

// A drawn figure's text alternative (a canvas that is not a control is an image).
export function describe(canvas, label) {
  if (!canvas.getAttribute("role")) canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
}

// rows x cols RGBA cells from `pixel(r, c) -> [r, g, b, a]`, scaled into `box`.
function paintCells(s, rows, cols, pixel, box) {
  const off = new OffscreenCanvas(cols, rows);
  const octx = off.getContext("2d");
  const data = octx.createImageData(cols, rows);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const p = pixel(r, c);
      data.data.set([p[0], p[1], p[2], p.length > 3 ? p[3] : 255], (r * cols + c) * 4);
    }
  }
  octx.putImageData(data, 0, 0);
  s.ctx.imageSmoothingEnabled = false;
  s.ctx.drawImage(off, box.x, box.y, box.w, box.h);
}

// The rectangle of square cells of a rows x cols grid centred in the surface.
export function fitBox(s, rows, cols, margin = 0) {
  const cell = Math.min((s.w - 2 * margin) / cols, (s.h - 2 * margin) / rows);
  const w = cell * cols, h = cell * rows;
  return { x: (s.w - w) / 2, y: (s.h - h) / 2, w, h, cell };
}

// An image {shape: [C, H, W], data} in [0, 1] over an area of `pad` (padded size [H', W']); returns its box.
// Padding is what the patches read there, the value 0 (black), hatched so that it is not taken for the image.
export function paintImage(s, image, pad = null) {
  const [c, h, w] = image.shape;
  const [ph, pw] = pad || [h, w];
  const box = fitBox(s, ph, pw);
  const plane = h * w;
  paintCells(s, ph, pw, (r, col) => {
    if (r >= h || col >= w) return [0, 0, 0];
    const i = r * w + col;
    const v = c === 3 ? [image.data[i], image.data[plane + i], image.data[2 * plane + i]]
      : [image.data[i], image.data[i], image.data[i]];
    return v.map((x) => Math.round(255 * Math.min(1, Math.max(0, x))));
  }, box);
  if (ph > h || pw > w) {
    const cw = box.w / pw, ch = box.h / ph;
    hatch(s, { x: box.x + w * cw, y: box.y, w: (pw - w) * cw, h: box.h });
    hatch(s, { x: box.x, y: box.y + h * ch, w: w * cw, h: (ph - h) * ch });
  }
  return box;
}

// Diagonal red lines over `area`: zero padding (the key beside the figure says so).
export function hatch(s, area) {
  if (area.w <= 0 || area.h <= 0) return;
  const { ctx } = s;
  ctx.save();
  ctx.beginPath();
  ctx.rect(area.x, area.y, area.w, area.h);
  ctx.clip();
  ctx.strokeStyle = HIGHLIGHT;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let d = -area.h; d < area.w; d += 5) {
    ctx.moveTo(area.x + d, area.y + area.h);
    ctx.lineTo(area.x + d + area.h, area.y);
  }
  ctx.stroke();
  ctx.restore();
}

export function drawImage(canvas, image, pad = null) {
  return paintImage(surface(canvas), image, pad);
}

// Values on a rows x cols grid over `box`, coloured on `scale` {lo, hi, map}, with transparency `alpha`.
export function paintHeat(s, values, rows, cols, scale, { box = null, alpha = 1, offset = 0 } = {}) {
  const area = box || fitBox(s, rows, cols);
  const span = scale.hi - scale.lo || 1;
  paintCells(s, rows, cols, (r, c) => [...colour((values[offset + r * cols + c] - scale.lo) / span, scale.map),
    Math.round(255 * alpha)], area);
  return area;
}

export function drawHeat(canvas, values, rows, cols, scale, options = {}) {
  return paintHeat(surface(canvas), values, rows, cols, scale, options);
}

export function paintGrid(s, box, rows, cols, stroke = "rgba(255,255,255,0.8)") {
  const { ctx } = s;
  ctx.strokeStyle = stroke;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let r = 0; r <= rows; r++) {
    const y = box.y + (box.h * r) / rows;
    ctx.moveTo(box.x, y); ctx.lineTo(box.x + box.w, y);
  }
  for (let c = 0; c <= cols; c++) {
    const x = box.x + (box.w * c) / cols;
    ctx.moveTo(x, box.y); ctx.lineTo(x, box.y + box.h);
  }
  ctx.stroke();
}

// A frame around cell `index` (raster order) of a rows x cols grid over `box`.
export function paintOutline(s, box, rows, cols, index, stroke = SELECTED, width = 3) {
  if (index === null || index < 0 || index >= rows * cols) return;
  const r = Math.floor(index / cols), c = index % cols;
  const cw = box.w / cols, ch = box.h / rows, inset = Math.min(width / 2, cw / 4, ch / 4);
  s.ctx.strokeStyle = stroke;
  s.ctx.lineWidth = Math.min(width, cw / 3, ch / 3) || 1;
  s.ctx.strokeRect(box.x + c * cw + inset, box.y + r * ch + inset, cw - 2 * inset, ch - 2 * inset);
}

// The linked highlight: the cell framed in white over a dark edge, visible on any colour.
export function paintHighlight(s, box, rows, cols, index) {
  paintOutline(s, box, rows, cols, index, "rgba(0,0,0,0.7)", 5);
  paintOutline(s, box, rows, cols, index, HIGHLIGHT, 2.5);
}

// A mask (values > 0.5 inside, rows x cols) over `box`, blended in blue at `alpha`; outside it, nothing.
export function paintMask(s, mask, rows, cols, box, alpha = 0.5) {
  const inside = [...MASK, Math.round(255 * alpha)];
  paintCells(s, rows, cols, (r, c) => (mask[r * cols + c] > 0.5 ? inside : [0, 0, 0, 0]), box);
}

// A prompt on an image of rows x cols pixels over `box`: each point (x, y), a pixel, as a dot with a sign
// (green with + for foreground, label 1; red with − for background), and a box [x0, y0, x1, y1] (x1, y1
// exclusive) in gold.
export function paintPrompt(s, box, rows, cols, { points = [], labels = [], rect = null }) {
  const { ctx } = s;
  const cw = box.w / cols, ch = box.h / rows;
  if (rect) {
    ctx.lineWidth = 3;
    ctx.strokeStyle = "rgba(0,0,0,0.7)";
    ctx.strokeRect(box.x + rect[0] * cw, box.y + rect[1] * ch, (rect[2] - rect[0]) * cw, (rect[3] - rect[1]) * ch);
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = BOX;
    ctx.strokeRect(box.x + rect[0] * cw, box.y + rect[1] * ch, (rect[2] - rect[0]) * cw, (rect[3] - rect[1]) * ch);
  }
  const radius = Math.max(5, Math.min(cw, ch) * 0.6);
  points.forEach(([x, y], i) => {
    const cx = box.x + (x + 0.5) * cw, cy = box.y + (y + 0.5) * ch;
    ctx.beginPath();
    ctx.arc(cx, cy, radius, 0, 2 * Math.PI);
    ctx.fillStyle = labels[i] === 1 ? FOREGROUND : BACKGROUND;
    ctx.fill();
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = "#fff";
    ctx.stroke();
    ctx.beginPath();
    ctx.moveTo(cx - radius / 2, cy);
    ctx.lineTo(cx + radius / 2, cy);
    if (labels[i] === 1) { ctx.moveTo(cx, cy - radius / 2); ctx.lineTo(cx, cy + radius / 2); }
    ctx.stroke();
  });
}

// Row and column `index` of an n x n matrix over `box` framed by thin lines just outside their cells, so the
// values pointed at stay visible (the linked highlight of a pairwise matrix).
export function paintRowColumn(s, box, n, index) {
  if (index === null || index < 0 || index >= n) return;
  const { x, y, w, h } = box;
  const cw = w / n, ch = h / n;
  s.ctx.lineWidth = 1;
  for (const [stroke, out] of [["rgba(255,255,255,0.9)", 1.5], [HIGHLIGHT, 0.5]]) {
    s.ctx.strokeStyle = stroke;
    s.ctx.strokeRect(x - out, y + index * ch - out, w + 2 * out, ch + 2 * out);
    s.ctx.strokeRect(x + index * cw - out, y - out, cw + 2 * out, h + 2 * out);
  }
}

// Patch numbers over a picture's grid, only where they leave it visible: each cell at least `smallest` pixels as
// shown on the screen (a canvas shrunk to a phone's width counts at its shown size) and at most MAX_NUMBERED cells
// (a 14x14 grid is numbered on hover, not over the picture).
const MAX_NUMBERED = 64;
export function paintNumbers(s, box, rows, cols, smallest = 18) {
  const cw = box.w / cols, ch = box.h / rows;
  const shown = s.canvas.getBoundingClientRect().width || s.w;
  if (Math.min(cw, ch) * (shown / s.w) < smallest || rows * cols > MAX_NUMBERED) return;
  const { ctx } = s;
  const size = Math.max(8, Math.min(12, Math.floor(Math.min(cw, ch) / 3)));
  ctx.font = `600 ${size}px system-ui, sans-serif`;
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  ctx.lineWidth = 3;
  ctx.strokeStyle = "rgba(0,0,0,0.75)";
  ctx.fillStyle = "#fff";
  for (let k = 0; k < rows * cols; k++) {
    const x = box.x + (k % cols) * cw + 2, y = box.y + Math.floor(k / cols) * ch + 2;
    ctx.strokeText(String(k), x, y);
    ctx.fillText(String(k), x, y);
  }
  ctx.textBaseline = "alphabetic";
}

// A definition list `list` (a <dl class="facts">) holding `pairs` of [name, value] as its terms and values.
export function facts(list, pairs) {
  list.replaceChildren();
  for (const [name, value] of pairs) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value;
    list.append(dt, dd);
  }
}

// The scale {lo, hi, map} of a heatmap as a colour bar: a gradient strip and its values at both ends and
// the middle, in `element` (which states the range in data-lo and data-hi, and as text for screen readers).
export function colourBar(element, scale, label, format = measure) {
  const same = element.dataset.lo === String(scale.lo) && element.dataset.hi === String(scale.hi) &&
    element.dataset.map === scale.map && element.dataset.label === label && element.firstChild;
  if (same) return;                   // unchanged: nothing to redraw
  element.dataset.label = label;
  element.replaceChildren();
  element.dataset.lo = scale.lo;
  element.dataset.hi = scale.hi;
  element.dataset.map = scale.map;
  element.setAttribute("role", "img");
  element.setAttribute("aria-label", `colour scale, ${label}: ${format(scale.lo)} to ${format(scale.hi)}`);
  const strip = makeCanvas(200, 10);
  strip.classList.add("fluid");
  strip.setAttribute("aria-hidden", "true");      // the element states the scale in words
  const s = surface(strip);
  const steps = 100;
  for (let i = 0; i < steps; i++) {
    s.ctx.fillStyle = `rgb(${colour(i / (steps - 1), scale.map).join(",")})`;
    s.ctx.fillRect((i * s.w) / steps, 0, s.w / steps + 0.5, s.h);
  }
  const ticks = document.createElement("div");
  ticks.className = "ticks";
  for (const v of [scale.lo, (scale.lo + scale.hi) / 2, scale.hi]) {
    const tick = document.createElement("span");
    tick.textContent = format(v);
    ticks.append(tick);
  }
  const name = document.createElement("span");
  name.className = "scale-label";
  name.textContent = label;
  element.append(strip, ticks, name);
}

// The canvas laid over `canvas` (created once, in a wrapper that stacks them) for highlights that change
// often; `paint(s)` draws on it, cleared, at the base canvas's size.
export function drawOverlay(canvas, paint = null) {
  let top = canvas.overlayCanvas;
  if (!top) {
    const stack = document.createElement("span");
    stack.className = "stack";
    canvas.replaceWith(stack);
    top = document.createElement("canvas");
    top.className = "overlay fluid";
    top.setAttribute("aria-hidden", "true");
    stack.append(canvas, top);
    canvas.overlayCanvas = top;
  }
  top.dataset.width = canvas.dataset.width || canvas.getAttribute("width");
  top.dataset.height = canvas.dataset.height || canvas.getAttribute("height");
  const s = surface(top);
  if (paint) paint(s);
  return s;
}

// Bars of `values` from 0 (or the lowest negative value), up to `top` when given, with an optional dashed
// reference line whose label sits above the plot (never over a bar); bar `selected` in orange, bar `highlight`
// framed. A value of -Infinity (a key the layer masks) is drawn as a cross on the axis. Returns the geometry
// to hit-test.
export function drawBars(canvas, values, { line = null, lineLabel = "", top = null, selected = -1, highlight = -1,
  labels = null } = {}) {
  const s = chartSurface(canvas);
  const { ctx, w: W, h: H } = s;
  const left = 40, bottom = 18, right = 8, topPad = line !== null ? 22 : 10;
  const finite = values.filter(Number.isFinite);
  const hi = top ?? Math.max(...finite, line ?? -Infinity, 0);
  const lo = Math.min(0, ...finite);
  const y = (v) => topPad + (H - topPad - bottom) * (1 - (Math.min(v, hi) - lo) / (hi - lo || 1));
  const step = (W - left - right) / values.length;
  ctx.font = "10px system-ui, sans-serif";
  values.forEach((v, i) => {
    ctx.fillStyle = i === selected ? SELECTED : "#3b5bdb";
    if (!Number.isFinite(v)) {
      ctx.fillText("×", left + (i + 0.5) * step - 3, y(0) - 2);
      return;
    }
    const y0 = y(Math.max(0, v)), y1 = y(Math.min(0, v));
    ctx.fillRect(left + i * step + step * 0.12, y0, step * 0.76, Math.max(1, y1 - y0));
  });
  if (highlight >= 0 && highlight < values.length) {
    ctx.strokeStyle = HIGHLIGHT;
    ctx.lineWidth = 2;
    ctx.strokeRect(left + highlight * step + 1, topPad - 4, step - 2, H - topPad - bottom + 6);
  }
  ctx.fillStyle = INK;
  ctx.font = "10px system-ui, sans-serif";
  ctx.textAlign = "right";
  ctx.fillText(measure(hi), left - 4, topPad + 8);
  ctx.fillText(lo === 0 ? "0" : measure(lo), left - 4, y(lo));
  ctx.strokeStyle = "#98a1b0";
  ctx.lineWidth = 1;
  ctx.beginPath(); ctx.moveTo(left, y(0)); ctx.lineTo(W - right, y(0)); ctx.stroke();
  if (labels) barTicks(ctx, labels, left, step, H - 5);
  if (line !== null) {
    ctx.strokeStyle = "#c92a2a";
    ctx.setLineDash([5, 4]);
    ctx.beginPath(); ctx.moveTo(left, y(line)); ctx.lineTo(W - right, y(line)); ctx.stroke();
    ctx.textAlign = "right";
    ctx.fillStyle = "#c92a2a";
    const width = ctx.measureText(lineLabel).width;
    ctx.beginPath(); ctx.moveTo(W - right - width - 26, 9); ctx.lineTo(W - right - width - 6, 9); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillText(lineLabel, W - right, 12);
  }
  return { left, step, count: values.length };
}

// Tick labels under bars, never run together: every k-th label with k a round step (1, 2, 5, 10, 20, 25, 50...)
// wide enough for the widest label, counted from the first numeric label, and a label that would still touch the
// previous one (a prefix such as "cls" beside "0") left out.
function barTicks(ctx, labels, left, step, y) {
  ctx.textAlign = "center";
  const widest = Math.max(...labels.map((l) => ctx.measureText(l).width)) + 6;
  const need = Math.ceil(widest / step);
  const every = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000].find((k) => k >= need) ?? need;
  const first = Math.max(0, labels.findIndex((l) => /^-?\d+$/.test(l)));
  let right = -Infinity;
  labels.forEach((label, i) => {
    const shown = i < first ? i === 0 : (i - first) % every === 0;
    const x = left + (i + 0.5) * step, half = ctx.measureText(label).width / 2;
    if (!shown || x - half < right + 4) return;
    ctx.fillText(label, x, y);
    right = x + half;
  });
}

// Small maps laid out in a grid: `rows` x `cols` maps of gh x gw cells each, map k's values at
// values[k * gh * gw ...], all on one `scale`, `gap` pixels apart, after `left` and `top` pixels of margin for
// labels. Returns the geometry {left, top, size, gap} that `tileHit` reads.
export function paintTiles(s, values, rows, cols, gh, gw, scale, { gap = 4, left = 0, top = 0 } = {}) {
  const size = Math.min((s.w - left - gap * (cols - 1)) / cols, (s.h - top - gap * (rows - 1)) / rows);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const box = { x: left + c * (size + gap), y: top + r * (size + gap), w: size * (gw >= gh ? 1 : gw / gh),
        h: size * (gh >= gw ? 1 : gh / gw) };
      paintHeat(s, values, gh, gw, scale, { box, offset: (r * cols + c) * gh * gw });
    }
  }
  return { left, top, size, gap, rows, cols };
}

// The map of a `paintTiles` layout at (x, y): its index, or -1.
export function tileHit({ left, top, size, gap, rows, cols }) {
  return (x, y) => {
    const c = Math.floor((x - left) / (size + gap)), r = Math.floor((y - top) / (size + gap));
    if (c < 0 || r < 0 || c >= cols || r >= rows) return -1;
    return r * cols + c;
  };
}

function ticks(lo, hi, log, integers = false) {
  if (log) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(10 ** e);
    const every = Math.ceil(out.length / 8);
    return out.filter((_, i) => i % every === 0);
  }
  const raw = (hi - lo) / 5 || 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(integers ? 1 : 0, [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw));
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
}

function tickText(v, log) {
  if (log) return v >= 1e4 || v < 1e-2 ? `1e${Math.round(Math.log10(v))}` : String(v);
  return Math.abs(v) >= 1e4 ? v.toExponential(0) : String(Number(v.toPrecision(4)));
}

// Lines of {label, x, y, colour, dash} on linear or log axes; the axes fit every series, drawn or hidden,
// so hiding one never rescales the others. Series whose label is in `hidden` are not drawn.
export function drawLines(canvas, series, { logX = false, logY = false, xLabel = "", yLabel = "", points = false,
  hidden = new Set() } = {}) {
  const s = chartSurface(canvas);
  const { ctx, w: W, h: H } = s;
  const left = 58, right = 12, top = 12, bottom = 40;
  const ok = (v, log) => v !== null && Number.isFinite(v) && (!log || v > 0);
  const xs = series.flatMap((c) => c.x.filter((v) => ok(v, logX)));
  const ys = series.flatMap((c) => c.y.filter((v) => ok(v, logY)));
  if (!xs.length || !ys.length) return;
  const tx = (v) => (logX ? Math.log10(v) : v), ty = (v) => (logY ? Math.log10(v) : v);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)], [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) x1 = x0 + 1;
  if (y0 === y1) { y0 = logY ? y0 / 2 : y0 - 0.5; y1 = logY ? y1 * 2 : y1 + 0.5; }
  const X = (v) => left + ((tx(v) - tx(x0)) / (tx(x1) - tx(x0))) * (W - left - right);
  const Y = (v) => top + (1 - (ty(v) - ty(y0)) / (ty(y1) - ty(y0))) * (H - top - bottom);
  ctx.font = "10px system-ui, sans-serif";
  ctx.strokeStyle = "#e3e6ec";
  ctx.fillStyle = INK;
  ctx.lineWidth = 1;
  ctx.textAlign = "right";
  for (const v of ticks(y0, y1, logY)) {
    if (v < y0 * (logY ? 0.999 : 1) - 1e-12 || v > y1 * 1.001 + 1e-12) continue;
    ctx.beginPath(); ctx.moveTo(left, Y(v)); ctx.lineTo(W - right, Y(v)); ctx.stroke();
    ctx.fillText(tickText(v, logY), left - 4, Y(v) + 3);
  }
  ctx.textAlign = "center";
  for (const v of ticks(x0, x1, logX, xs.every(Number.isInteger))) {
    if (v < x0 * 0.999 - 1e-12 || v > x1 * 1.001 + 1e-12) continue;
    ctx.beginPath(); ctx.moveTo(X(v), top); ctx.lineTo(X(v), H - bottom); ctx.stroke();
    ctx.fillText(tickText(v, logX), X(v), H - bottom + 12);
  }
  ctx.fillText(xLabel, (left + W - right) / 2, H - 6);
  ctx.save();
  ctx.translate(12, (top + H - bottom) / 2); ctx.rotate(-Math.PI / 2); ctx.fillText(yLabel, 0, 0);
  ctx.restore();
  series.forEach((c, k) => {
    if (hidden.has(c.label)) return;
    const style = seriesStyle(k);
    ctx.strokeStyle = ctx.fillStyle = c.colour || style.colour;
    ctx.setLineDash(c.dash || style.dash);
    ctx.lineWidth = 2;
    ctx.beginPath();
    let started = false;
    c.x.forEach((xv, i) => {
      const yv = c.y[i];
      if (!ok(xv, logX) || !ok(yv, logY)) { started = false; return; }
      if (started) ctx.lineTo(X(xv), Y(yv)); else ctx.moveTo(X(xv), Y(yv));
      started = true;
    });
    ctx.stroke();
    ctx.setLineDash([]);
    if (!points) return;
    c.x.forEach((xv, i) => { if (ok(xv, logX) && ok(c.y[i], logY)) ctx.fillRect(X(xv) - 2, Y(c.y[i]) - 2, 4, 4); });
  });
  ctx.lineWidth = 1;
}

// A line chart with its legend beside the plot: each entry a toggle button (aria-pressed) that hides or
// shows its series; `notes` are sentences under the legend (e.g. which series coincide).
export function lineChart(canvas, list, series, options = {}, notes = []) {
  const hidden = canvas.hiddenSeries || (canvas.hiddenSeries = new Set());
  for (const label of [...hidden]) if (!series.some((c) => c.label === label)) hidden.delete(label);
  const redraw = () => drawLines(canvas, series, { ...options, hidden });
  redraw();
  list.replaceChildren();
  series.forEach((c, k) => {
    const style = seriesStyle(k);
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "series";
    button.style.setProperty("--colour", c.colour || style.colour);
    if ((c.dash || style.dash).length) button.classList.add("dashed");
    button.setAttribute("aria-pressed", String(!hidden.has(c.label)));
    button.dataset.colour = c.colour || style.colour;
    button.textContent = c.label;
    button.addEventListener("click", () => {
      if (hidden.has(c.label)) hidden.delete(c.label); else hidden.add(c.label);
      button.setAttribute("aria-pressed", String(!hidden.has(c.label)));
      redraw();
    });
    item.append(button);
    list.append(item);
  });
  for (const note of notes) {
    const item = document.createElement("li");
    item.className = "legend-note";
    item.textContent = note;
    list.append(item);
  }
  const names = series.map((c) => c.label).join(", ");
  describe(canvas, `${options.yLabel || "value"} against ${options.xLabel || "x"}: ${names}`);
}
