// Tokens page: the patch-size slider redraws the grid, the patches and the token matrix, and the
// server's token count, attention entries and cost ratio. A patch, its tile and its token row are linked:
// hover or focus one (arrow keys move) and all three light up.
import { $, announce, decode, getJSON, latest } from "./api.js";
import { cursor, gridHit, link } from "./cursor.js";
import { colourBar, describe, drawHeat, drawOverlay, fitBox, paintGrid, paintHighlight, paintImage, paintNumbers,
  surface } from "./draw.js";
import { count, ratio } from "./format.js";
import { onImage, picker } from "./picker.js";
import { remember, setting } from "./state.js";

const page = $("page-tokens");
const run = latest(page, $("tokens-error"));
const patch = link();
const view = { image: null, result: null, pixels: null, tiles: null, matrix: null };
let fromURL = null;               // the patch size asked for by the URL, used for the first image only

// Each token row back on its own tile (a reshape for drawing), the tiles apart in raster order.
function drawPatches(canvas, matrix, grid, size, channels) {
  const s = surface(canvas);
  const [gh, gw] = grid;
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
  for (let n = 0; n < gh * gw; n++) {
    const r = Math.floor(n / gw), c = n % gw;
    s.ctx.drawImage(sheet, c * size, r * size, size, size, c * (cell + gap), r * (cell + gap), cell, cell);
  }
  const tiles = { gap, cell, rows: gh, cols: gw };
  paintNumbers(s, { x: 0, y: 0, w: gw * (cell + gap), h: gh * (cell + gap) }, gh, gw);
  return tiles;
}

function tileHit({ gap, cell, rows, cols }) {
  return (x, y) => {
    const c = Math.floor(x / (cell + gap)), r = Math.floor(y / (cell + gap));
    const inGap = x - c * (cell + gap) > cell || y - r * (cell + gap) > cell;
    if (c < 0 || r < 0 || c >= cols || r >= rows || inGap) return -1;
    return r * cols + c;
  };
}

// Keep a tall or wide matrix readable: each cell at least a pixel, the box within the canvas.
function stretchBox(s, rows, cols) {
  const box = fitBox(s, rows, cols);
  if (box.w >= 24 && box.h >= 24) return box;
  const w = Math.min(s.w, Math.max(box.w, Math.min(s.w, cols * 8)));
  const h = Math.min(s.h, Math.max(box.h, Math.min(s.h, rows * 8)));
  return { x: (s.w - w) / 2, y: (s.h - h) / 2, w, h };
}

function rowHit(box, rows) {
  return (x, y) => (x < box.x || x >= box.x + box.w || y < box.y || y >= box.y + box.h ? -1
    : Math.floor(((y - box.y) / box.h) * rows));
}

function draw(result) {
  const picture = view.image.image;
  view.result = result;
  const [gh, gw] = result.grid;
  const n = result.tokens;
  $("patch-value").textContent = result.patch;
  const slider = $("patch-slider");
  [slider.min, slider.max] = result.patch_range;
  slider.value = result.patch;
  slider.setAttribute("aria-valuetext", `patch ${result.patch} pixels: ${count(n)} tokens`);
  remember({ patch: result.patch });
  const pixels = $("tokens-pixels");
  const s = surface(pixels);
  view.pixels = paintImage(s, picture, result.padded);
  paintGrid(s, view.pixels, gh, gw, "rgba(255, 45, 85, 0.9)");
  paintNumbers(s, view.pixels, gh, gw);
  const matrix = decode(result.matrix);
  view.tiles = drawPatches($("tokens-patches"), matrix, result.grid, result.patch, result.channels);
  const canvas = $("tokens-matrix");
  const width = matrix.shape[1];
  view.matrix = stretchBox(surface(canvas), n, width);
  const scale = { lo: 0, hi: 1, map: "grey" };
  drawHeat(canvas, matrix.data, n, width, scale, { box: view.matrix });
  colourBar($("tokens-matrix-scale"), scale, "pixel value");
  describe(canvas, `token matrix: ${count(n)} rows (tokens) of ${count(width)} pixel values`);
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
  const { ref } = view.image;
  run(() => getJSON("/api/tokens", { ref, patch: Number($("patch-slider").value) }), draw);
}

function load(ref) {
  view.image = null;
  getJSON("/api/image", { ref }).then((answer) => {
    if (ref !== picker.ref) return;
    view.image = { ref, image: decode(answer.image) };
    // Start at the URL's patch size, else one that makes a 4x4 grid when the image allows it.
    const side = Math.min(answer.height, answer.width);
    const slider = $("patch-slider");
    slider.max = side;
    const wanted = Number(fromURL);
    slider.value = fromURL && wanted >= 1 && wanted <= side ? wanted : Math.max(1, Math.floor(side / 4));
    fromURL = null;
    refresh();
  }).catch((err) => { $("tokens-error").textContent = err.message; page.dataset.state = "error"; });
}

export function initTokens() {
  fromURL = setting("patch");
  $("patch-slider").addEventListener("input", refresh);
  onImage(load);
  if (picker.ref) load(picker.ref);
}
