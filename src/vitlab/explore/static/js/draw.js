// Canvas drawing: images, heatmaps, bars and line charts. Drawing only; every value is given.

const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
const GREY = [[0, 0, 0], [255, 255, 255]];
export const SERIES = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c"];

export function colour(t, map = VIRIDIS) {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (map.length - 1);
  const i = Math.min(map.length - 2, Math.floor(x));
  const f = x - i;
  return map[i].map((c, k) => Math.round(c + f * (map[i + 1][k] - c)));
}

export function grey(t) {
  return colour(t, GREY);
}

function context(canvas) {
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  return ctx;
}

// rows x cols RGBA cells from `pixel(r, c) -> [r, g, b, a]`, scaled into the rectangle.
function paintCells(ctx, rows, cols, pixel, x, y, w, h) {
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
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, x, y, w, h);
}

// Fit a rows x cols grid of square cells into the canvas; returns the rectangle used.
export function fitBox(canvas, rows, cols, margin = 0) {
  const cell = Math.min((canvas.width - 2 * margin) / cols, (canvas.height - 2 * margin) / rows);
  const w = cell * cols, h = cell * rows;
  return { x: (canvas.width - w) / 2, y: (canvas.height - h) / 2, w, h, cell };
}

// An image {shape: [C, H, W], data} in [0, 1], over an area of `pad` (padded size [H', W']).
export function drawImage(canvas, image, pad = null, clear = true) {
  const [c, h, w] = image.shape;
  const [ph, pw] = pad || [h, w];
  const ctx = context(canvas);
  if (clear) ctx.clearRect(0, 0, canvas.width, canvas.height);
  const box = fitBox(canvas, ph, pw);
  const plane = h * w;
  paintCells(ctx, ph, pw, (r, col) => {
    if (r >= h || col >= w) return [230, 232, 236];
    const i = r * w + col;
    const v = c === 3 ? [image.data[i], image.data[plane + i], image.data[2 * plane + i]]
      : [image.data[i], image.data[i], image.data[i]];
    return v.map((x) => Math.round(255 * Math.min(1, Math.max(0, x))));
  }, box.x, box.y, box.w, box.h);
  return box;
}

// Values on a rows x cols grid over `box`, coloured on [lo, hi], with transparency `alpha`.
export function drawHeat(canvas, values, rows, cols, lo, hi, { box = null, alpha = 1, offset = 0, map = colour } = {}) {
  const ctx = context(canvas);
  const area = box || fitBox(canvas, rows, cols);
  const span = hi - lo || 1;
  paintCells(ctx, rows, cols, (r, c) => [...map((values[offset + r * cols + c] - lo) / span), Math.round(255 * alpha)],
    area.x, area.y, area.w, area.h);
  return area;
}

export function drawGridLines(canvas, box, rows, cols, colourText = "rgba(255,255,255,0.8)") {
  const ctx = context(canvas);
  ctx.strokeStyle = colourText;
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

export function outlineCell(canvas, box, rows, cols, index, stroke = "#ff2d55") {
  const ctx = context(canvas);
  const r = Math.floor(index / cols), c = index % cols;
  ctx.strokeStyle = stroke;
  ctx.lineWidth = 3;
  ctx.strokeRect(box.x + (box.w * c) / cols + 1.5, box.y + (box.h * r) / rows + 1.5, box.w / cols - 3, box.h / rows - 3);
}

// The grid cell under a click, or -1.
export function cellAt(event, canvas, box, rows, cols) {
  const rect = canvas.getBoundingClientRect();
  const x = ((event.clientX - rect.left) * canvas.width) / rect.width - box.x;
  const y = ((event.clientY - rect.top) * canvas.height) / rect.height - box.y;
  if (x < 0 || y < 0 || x >= box.w || y >= box.h) return -1;
  return Math.floor((y / box.h) * rows) * cols + Math.floor((x / box.w) * cols);
}

// Bars of `values` from 0 (or the lowest negative value) with an optional dashed reference line.
export function drawBars(canvas, values, { line = null, lineLabel = "", top = null, highlight = -1, labels = null } = {}) {
  const ctx = context(canvas);
  const W = canvas.width, H = canvas.height, left = 34, bottom = 18, right = 8, topPad = 10;
  ctx.clearRect(0, 0, W, H);
  const hi = Math.max(top ?? -Infinity, ...values, line ?? -Infinity, 0);
  const lo = Math.min(0, ...values);
  const y = (v) => topPad + (H - topPad - bottom) * (1 - (v - lo) / (hi - lo || 1));
  const step = (W - left - right) / values.length;
  values.forEach((v, i) => {
    ctx.fillStyle = i === highlight ? "#e8590c" : "#3b5bdb";
    const y0 = y(Math.max(0, v)), y1 = y(Math.min(0, v));
    ctx.fillRect(left + i * step + step * 0.12, y0, step * 0.76, Math.max(1, y1 - y0));
  });
  ctx.fillStyle = "#5d6675";
  ctx.font = "10px system-ui";
  ctx.textAlign = "right";
  ctx.fillText(hi.toPrecision(2), left - 4, topPad + 8);
  ctx.fillText(lo === 0 ? "0" : lo.toPrecision(2), left - 4, y(lo));
  ctx.strokeStyle = "#98a1b0";
  ctx.beginPath(); ctx.moveTo(left, y(0)); ctx.lineTo(W - right, y(0)); ctx.stroke();
  if (labels) {
    ctx.textAlign = "center";
    const every = Math.ceil(labels.length / 24);
    labels.forEach((label, i) => { if (i % every === 0) ctx.fillText(label, left + (i + 0.5) * step, H - 5); });
  }
  if (line !== null) {
    ctx.strokeStyle = "#c92a2a";
    ctx.setLineDash([5, 4]);
    ctx.beginPath(); ctx.moveTo(left, y(line)); ctx.lineTo(W - right, y(line)); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = "#c92a2a";
    ctx.textAlign = "right";
    ctx.strokeStyle = "rgba(255, 255, 255, 0.9)";
    ctx.lineWidth = 3;
    ctx.strokeText(lineLabel, W - right, y(line) - 4);
    ctx.fillText(lineLabel, W - right, y(line) - 4);
    ctx.lineWidth = 1;
  }
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

// Lines of {label, x, y} on linear or log axes, with a legend.
export function drawLines(canvas, series, { logX = false, logY = false, xLabel = "", yLabel = "", points = false } = {}) {
  const ctx = context(canvas);
  const W = canvas.width, H = canvas.height, left = 58, right = 12, top = 12, bottom = 40;
  ctx.clearRect(0, 0, W, H);
  const ok = (v, log) => v !== null && Number.isFinite(v) && (!log || v > 0);
  const xs = series.flatMap((s) => s.x.filter((v) => ok(v, logX)));
  const ys = series.flatMap((s) => s.y.filter((v) => ok(v, logY)));
  if (!xs.length || !ys.length) return;
  const tx = (v) => (logX ? Math.log10(v) : v), ty = (v) => (logY ? Math.log10(v) : v);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)], [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) x1 = x0 + 1;
  if (y0 === y1) { y0 = logY ? y0 / 2 : y0 - 0.5; y1 = logY ? y1 * 2 : y1 + 0.5; }
  const X = (v) => left + ((tx(v) - tx(x0)) / (tx(x1) - tx(x0))) * (W - left - right);
  const Y = (v) => top + (1 - (ty(v) - ty(y0)) / (ty(y1) - ty(y0))) * (H - top - bottom);
  ctx.font = "10px system-ui";
  ctx.strokeStyle = "#e3e6ec";
  ctx.fillStyle = "#5d6675";
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
  ctx.save(); ctx.translate(12, (top + H - bottom) / 2); ctx.rotate(-Math.PI / 2); ctx.fillText(yLabel, 0, 0); ctx.restore();
  series.forEach((s, k) => {
    ctx.strokeStyle = ctx.fillStyle = s.colour || SERIES[k % SERIES.length];
    ctx.lineWidth = 2;
    ctx.beginPath();
    let started = false;
    s.x.forEach((xv, i) => {
      const yv = s.y[i];
      if (!ok(xv, logX) || !ok(yv, logY)) { started = false; return; }
      if (started) ctx.lineTo(X(xv), Y(yv)); else ctx.moveTo(X(xv), Y(yv));
      started = true;
    });
    ctx.stroke();
    if (points) s.x.forEach((xv, i) => { if (ok(xv, logX) && ok(s.y[i], logY)) ctx.fillRect(X(xv) - 2, Y(s.y[i]) - 2, 4, 4); });
    ctx.textAlign = "left";
    ctx.fillText(s.label, left + 8, top + 12 + 13 * k);
  });
  ctx.lineWidth = 1;
}
