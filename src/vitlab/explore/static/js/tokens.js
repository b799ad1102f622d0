// Tokens page: the patch-size slider redraws the grid, the patches and the token matrix, and the
// server's token count, attention entries and cost ratio. "Read by" shows the tokens a loaded model reads
// (the image fitted to its input, cut at its patch size) or the image at its own size. A patch, its tile and
// its token row are linked: hover or focus one (arrow keys move) and all three light up.
import { $, announce, decode, getJSON, latest, modelLabels, setState } from "./api.js";
import { cursor, gridHit, link } from "./cursor.js";
import { colourBar, describe, drawOverlay, fitBox, hatch, paintGrid, paintHeat, paintHighlight, paintImage,
  paintNumbers, surface } from "./draw.js";
import { count, ratio } from "./format.js";
import { onImage, picker } from "./picker.js";
import { remember, setting } from "./state.js";

const page = $("page-tokens");
const run = latest(page, $("tokens-error"));
const patch = link();
const view = { image: null, result: null, pixels: null, tiles: null, matrix: null, models: [] };
const MATRIX_BACK = "#e6ecf8";    // around the matrix: a tint no grey pixel value has
const AXIS = "#3d4656";
let fromURL = null;               // the patch size asked for by the URL, used for the first image only
let readerFromURL = null;         // the reader asked for by the URL, likewise

// Each token row back on its own tile (a reshape for drawing), the tiles apart in raster order; the pixels
// that are zero padding hatched, as on the image.
function drawPatches(canvas, matrix, result) {
  const s = surface(canvas);
  const [gh, gw] = result.grid;
  const size = result.patch, channels = result.channels;
  const width = matrix.shape[1];
  const sheet = new OffscreenCanvas(gw * size, gh * size);
  const sctx = sheet.getContext("2d");
  const pixels = sctx.createImageData(gw * size, gh * size);
  for (let n = 0; n < gh * gw; n++) {
    const r0 = Math.floor(n / gw) * size, c0 = (n % gw) * size;
    for (let i = 0; i < size; i++) for (let j = 0; j < size; j++) {
      const at = n * width + (i * size + j) * channels;      // token index (i * P + j) * C + k
      const rgb = channels === 3 ? [matrix.data[at], matrix.data[at + 1], matrix.data[at + 2]]
        : [matrix.data[at], matrix.data[at], matrix.data[at]];
      pixels.data.set([...rgb.map((v) => Math.round(255 * Math.min(1, Math.max(0, v)))), 255],
        ((r0 + i) * gw * size + c0 + j) * 4);
    }
  }
  sctx.putImageData(pixels, 0, 0);
  const gap = Math.max(1, Math.min(6, Math.floor(s.w / (gw * 8))));
  const cell = Math.min((s.w - gap * (gw - 1)) / gw, (s.h - gap * (gh - 1)) / gh);
  const px = cell / size;
  for (let n = 0; n < gh * gw; n++) {
    const r = Math.floor(n / gw), c = n % gw;
    const x = c * (cell + gap), y = r * (cell + gap);
    s.ctx.drawImage(sheet, c * size, r * size, size, size, x, y, cell, cell);
    const right = Math.max(0, (c + 1) * size - result.width), below = Math.max(0, (r + 1) * size - result.height);
    if (right) hatch(s, { x: x + (size - right) * px, y, w: right * px, h: cell });
    if (below) hatch(s, { x, y: y + (size - below) * px, w: (size - right) * px, h: below * px });
  }
  paintNumbers(s, { x: 0, y: 0, w: gw * (cell + gap), h: gh * (cell + gap) }, gh, gw);
  return { gap, cell, rows: gh, cols: gw };
}

function tileHit({ gap, cell, rows, cols }) {
  return (x, y) => {
    const c = Math.floor(x / (cell + gap)), r = Math.floor(y / (cell + gap));
    const inGap = x - c * (cell + gap) > cell || y - r * (cell + gap) > cell;
    if (c < 0 || r < 0 || c >= cols || r >= rows || inGap) return -1;
    return r * cols + c;
  };
}

// The token matrix on a tinted ground with its axes: rows are tokens 0..N-1, columns the P²C values.
function drawMatrix(canvas, matrix, n, width) {
  const s = surface(canvas);
  s.ctx.font = "10px system-ui, sans-serif";   // the row ticks' width sets the margin: the axis label clears them
  const margin = { left: 22 + Math.ceil(s.ctx.measureText(String(n - 1)).width), top: 18, right: 4, bottom: 4 };
  s.ctx.fillStyle = MATRIX_BACK;
  s.ctx.fillRect(0, 0, s.w, s.h);
  const inner = { w: s.w - margin.left - margin.right, h: s.h - margin.top - margin.bottom };
  let box = fitBox({ w: inner.w, h: inner.h }, n, width);
  if (box.w < 24 || box.h < 24) {       // a tall or wide matrix: stretch its cells, keep it in the canvas
    const w = Math.min(inner.w, Math.max(box.w, Math.min(inner.w, width * 8)));
    const h = Math.min(inner.h, Math.max(box.h, Math.min(inner.h, n * 8)));
    box = { x: (inner.w - w) / 2, y: (inner.h - h) / 2, w, h };
  }
  box = { ...box, x: box.x + margin.left, y: box.y + margin.top };
  paintHeat(s, matrix.data, n, width, { lo: 0, hi: 1, map: "grey" }, { box });
  const { ctx } = s;
  ctx.strokeStyle = AXIS;
  ctx.strokeRect(box.x - 0.5, box.y - 0.5, box.w + 1, box.h + 1);
  ctx.fillStyle = AXIS;
  ctx.font = "10px system-ui, sans-serif";
  ctx.textAlign = "right";
  ctx.fillText("0", box.x - 4, box.y + 9);
  ctx.fillText(String(n - 1), box.x - 4, box.y + box.h);
  ctx.save();
  ctx.translate(10, box.y + box.h / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.fillText("token", 0, 0);
  ctx.restore();
  ctx.textAlign = "left";
  ctx.fillText("0", box.x, box.y - 5);
  ctx.textAlign = "right";
  ctx.fillText(String(width - 1), box.x + box.w, box.y - 5);
  ctx.textAlign = "center";
  ctx.fillText("value in the token →", box.x + box.w / 2, box.y - 5);
  return box;
}

function rowHit(box, rows) {
  return (x, y) => (x < box.x || x >= box.x + box.w || y < box.y || y >= box.y + box.h ? -1
    : Math.floor(((y - box.y) / box.h) * rows));
}

function readingWords(result) {
  const what = (c) => (c === 1 ? "greyscale" : "RGB");
  const r = result.read_by;
  if (!r) return `The image at its own size, ${result.height}×${result.width} ${what(result.channels)}, cut into ` +
    `${result.patch}×${result.patch} patches: choose P.`;
  const [h, w, c] = r.original;
  const resized = h !== r.size[0] || w !== r.size[1];
  const steps = [c !== r.channels ? `${what(c)} to ${what(r.channels)}` : null,
    resized ? `resized from ${h}×${w} to ${r.size[0]}×${r.size[1]}` : null].filter(Boolean);
  return `As ${r.name} reads it: the ${h}×${w} ${what(c)} image ${steps.length ? steps.join(", ") : "as it is"}, ` +
    `cut into its ${r.patch}×${r.patch} patches (P is the model's).`;
}

function draw(result) {
  const picture = result.read_by ? result.fitted : result.picture;
  view.result = result;
  const [gh, gw] = result.grid;
  const n = result.tokens;
  $("patch-value").textContent = result.patch;
  const slider = $("patch-slider");
  [slider.min, slider.max] = result.patch_range;
  slider.value = result.patch;
  slider.disabled = Boolean(result.read_by);
  slider.setAttribute("aria-valuetext", `patch ${result.patch} pixels: ${count(n)} tokens`);
  remember({ patch: result.read_by ? null : result.patch, reader: result.read_by ? result.read_by.model : "image" });
  $("tokens-reading").textContent = readingWords(result);
  const pixels = $("tokens-pixels");
  const s = surface(pixels);
  view.pixels = paintImage(s, picture, result.padded);
  paintGrid(s, view.pixels, gh, gw, "rgba(255, 45, 85, 0.9)");
  paintNumbers(s, view.pixels, gh, gw);
  const matrix = decode(result.matrix);
  view.tiles = drawPatches($("tokens-patches"), matrix, result);
  const canvas = $("tokens-matrix");
  const width = matrix.shape[1];
  view.matrix = drawMatrix(canvas, matrix, n, width);
  colourBar($("tokens-matrix-scale"), { lo: 0, hi: 1, map: "grey" }, "pixel value (the matrix sits on a blue ground)");
  cursors.pixels.layout(n, gw, gridHit(view.pixels, gh, gw));
  cursors.patches.layout(n, gw, tileHit(view.tiles));
  cursors.matrix.layout(n, 1, rowHit(view.matrix, n));
  $("tokens-matrix-caption").textContent = `token matrix ${count(n)} × ${count(width)} (rows: tokens)`;
  $("token-count").textContent = count(n);
  $("token-width").textContent = `${count(result.token_width)} = ${result.patch}² × ${result.channels}`;
  const padded = result.padded[0] !== result.height || result.padded[1] !== result.width;
  $("token-grid").textContent = `${gh} × ${gw}` +
    (padded ? ` (image ${result.height}×${result.width} zero-padded to ${result.padded.join("×")})` : "");
  $("token-entries").textContent = count(result.entries);
  const ref = result.reference;
  $("token-ratio").textContent =
    `${ratio(result.ratio)} the entries of ${ref.image}×${ref.image} at P = ${ref.patch} ` +
    `(${count(ref.tokens)} tokens, ${count(ref.entries)} entries)`;
  light(patch.get());
  announce(`patch ${result.patch}: ${count(n)} tokens of ${count(width)} values, ` +
    `${count(result.entries)} attention entries`);
}

// Patch `k` lit on the pixel grid, its tile and its token row (null: none).
function light(k) {
  if (!view.result) return;
  const [gh, gw] = view.result.grid;
  const n = view.result.tokens;
  const k2 = k !== null && k < n ? k : null;
  drawOverlay($("tokens-pixels"), (s) => paintHighlight(s, view.pixels, gh, gw, k2));
  drawOverlay($("tokens-patches"), (s) => {
    const { gap, cell } = view.tiles;
    paintHighlight(s, { x: 0, y: 0, w: gw * (cell + gap), h: gh * (cell + gap) }, gh, gw, k2);
  });
  drawOverlay($("tokens-matrix"), (s) => paintHighlight(s, view.matrix, n, 1, k2));
  for (const id of ["tokens-pixels", "tokens-patches", "tokens-matrix"]) $(id).dataset.highlight = k2 ?? "";
}

const describePatch = (k) => {
  if (!view.result) return `patch ${k}`;
  const gw = view.result.grid[1];
  return `patch ${k}: row ${Math.floor(k / gw)}, column ${k % gw}`;
};

const cursors = {
  pixels: cursor($("tokens-pixels"), { label: "patch grid on the image", describe: describePatch, onMove: patch.set }),
  patches: cursor($("tokens-patches"), { label: "patches, raster order", describe: describePatch, onMove: patch.set }),
  matrix: cursor($("tokens-matrix"), { label: "token matrix rows", describe: (k) => `token row ${k}`,
    onMove: patch.set }),
};
patch.on(light);

function refresh() {
  if (!view.image) return;
  const { ref, image } = view.image;
  const reader = $("tokens-reader").value;
  const params = reader === "" ? { ref, patch: Number($("patch-slider").value) } : { ref, model: Number(reader) };
  run(async () => {
    const result = await getJSON("/api/tokens", params);
    result.picture = image;             // the image this answer is of, whatever is chosen meanwhile
    if (result.read_by) {   // the fitted image the model reads: its patches, put back in place, are the pixels drawn
      result.fitted = fittedImage(decode(result.matrix), result);
    }
    return result;
  }, draw);
}

// The image a model reads, rebuilt from its token matrix (a reshape: the server computed every value).
function fittedImage(matrix, result) {
  const [gh, gw] = result.grid;
  const p = result.patch, c = result.channels, h = result.height, w = result.width;
  const data = new Float32Array(c * h * w);
  for (let n = 0; n < gh * gw; n++) {
    for (let i = 0; i < p; i++) for (let j = 0; j < p; j++) for (let k = 0; k < c; k++) {
      const y = Math.floor(n / gw) * p + i, x = (n % gw) * p + j;
      if (y < h && x < w) data[k * h * w + y * w + x] = matrix.data[n * matrix.shape[1] + (i * p + j) * c + k];
    }
  }
  return { shape: [c, h, w], data };
}

// The reader an image starts with: the URL's (a link giving only a patch size means the image itself), else a
// model trained on the image's dataset, else for an upload or a drawing the first ViT, else the image itself.
function defaultReader(ref) {
  const options = [...$("tokens-reader").options].map((o) => o.value);
  if (readerFromURL !== null || fromURL !== null) {      // a link with a patch size reads the image itself
    const wanted = readerFromURL === null || readerFromURL === "image" ? "" : readerFromURL;
    readerFromURL = null;
    if (options.includes(wanted)) return wanted;
  }
  const source = ref.split(":")[0];
  const own = view.models.find((m) => m.samples === source);
  if (own) return String(own.index);
  if (source === "upload" && view.models.length) return String(view.models[0].index);
  return "";
}

function load(ref) {
  view.image = null;
  getJSON("/api/image", { ref }).then((answer) => {
    if (ref !== picker.ref) return;
    view.image = { ref, image: decode(answer.image) };
    $("tokens-reader").value = defaultReader(ref);
    // Start at the URL's patch size, else one that makes a 4x4 grid when the image allows it.
    const side = Math.min(answer.height, answer.width);
    const slider = $("patch-slider");
    slider.max = side;
    const wanted = Number(fromURL);
    slider.value = fromURL && wanted >= 1 && wanted <= side ? wanted : Math.max(1, Math.floor(side / 4));
    fromURL = null;
    refresh();
  }).catch((err) => { $("tokens-error").textContent = err.message; setState(page, "error"); });
}

export function initTokens(info) {
  view.models = info.models.filter((m) => m.patch_size !== null && m.attention);
  const select = $("tokens-reader");
  select.append(new Option("the image itself (choose P)", ""));
  const labels = modelLabels(info.models);
  for (const model of view.models) {
    const words = model.channels === 1 ? "grey" : "RGB";
    select.append(new Option(`${labels[model.index]}: ${model.image_size.join("×")} ${words}, patch ` +
      `${model.patch_size}`, String(model.index)));
  }
  fromURL = setting("patch");
  readerFromURL = setting("reader");
  $("patch-slider").addEventListener("input", refresh);
  select.addEventListener("change", refresh);
  onImage(load);
  if (picker.ref) load(picker.ref);
}
