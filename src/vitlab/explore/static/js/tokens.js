// Tokens page: the patch-size slider redraws the grid, the patches and the token matrix, and the
// server's token count, attention entries and cost ratio.
import { $, decode, fmt, getJSON, latest } from "./api.js";
import { drawGridLines, drawHeat, drawImage, fitBox, grey } from "./draw.js";
import { onImage, picker } from "./picker.js";

const page = $("page-tokens");
const run = latest(page, $("tokens-error"));
let image = null;          // {ref, image: decoded (C, H, W)}

// Each token row back on its own tile (a reshape for drawing), the tiles apart in raster order.
function drawPatches(canvas, matrix, grid, patch, channels) {
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const [gh, gw] = grid;
  const width = matrix.shape[1];
  const sheet = new OffscreenCanvas(gw * patch, gh * patch);
  const sctx = sheet.getContext("2d");
  const pixels = sctx.createImageData(gw * patch, gh * patch);
  for (let n = 0; n < gh * gw; n++) {
    const r0 = Math.floor(n / gw) * patch, c0 = (n % gw) * patch;
    for (let i = 0; i < patch; i++) for (let j = 0; j < patch; j++) {
      const at = n * width + (i * patch + j) * channels;      // token index (i * P + j) * C + k
      const rgb = channels === 3 ? [matrix.data[at], matrix.data[at + 1], matrix.data[at + 2]]
        : [matrix.data[at], matrix.data[at], matrix.data[at]];
      pixels.data.set([...rgb.map((v) => Math.round(255 * Math.min(1, Math.max(0, v)))), 255],
        ((r0 + i) * gw * patch + c0 + j) * 4);
    }
  }
  sctx.putImageData(pixels, 0, 0);
  const gap = Math.max(1, Math.min(6, Math.floor(canvas.width / (gw * 8))));
  const cell = Math.min((canvas.width - gap * (gw - 1)) / gw, (canvas.height - gap * (gh - 1)) / gh);
  for (let n = 0; n < gh * gw; n++) {
    const r = Math.floor(n / gw), c = n % gw;
    ctx.drawImage(sheet, c * patch, r * patch, patch, patch, c * (cell + gap), r * (cell + gap), cell, cell);
  }
}

function draw(result, picture) {
  $("patch-value").textContent = result.patch;
  const slider = $("patch-slider");
  [slider.min, slider.max] = result.patch_range;
  slider.value = result.patch;
  const pixels = $("tokens-pixels");
  const box = drawImage(pixels, picture, result.padded);
  drawGridLines(pixels, box, result.grid[0], result.grid[1], "rgba(255, 45, 85, 0.9)");
  const matrix = decode(result.matrix);
  drawPatches($("tokens-patches"), matrix, result.grid, result.patch, result.channels);
  const canvas = $("tokens-matrix");
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  const [n, width] = matrix.shape;
  drawHeat(canvas, matrix.data, n, width, 0, 1, { box: stretchBox(canvas, n, width), map: grey });
  $("tokens-matrix-caption").textContent = `token matrix ${fmt(n)} × ${fmt(width)} (rows: tokens)`;
  $("token-count").textContent = fmt(result.tokens);
  $("token-width").textContent = `${fmt(result.token_width)} = ${result.patch}² × ${result.channels}`;
  const padded = result.padded[0] !== result.height || result.padded[1] !== result.width;
  $("token-grid").textContent = `${result.grid[0]} × ${result.grid[1]}` +
    (padded ? ` (image ${result.height}×${result.width} zero-padded to ${result.padded[0]}×${result.padded[1]})` : "");
  $("token-entries").textContent = fmt(result.entries);
  const ref = result.reference;
  $("token-ratio").textContent = `${fmt(result.ratio, 2)}× the entries of ${ref.image}×${ref.image} at P = ${ref.patch} ` +
    `(${fmt(ref.tokens)} tokens, ${fmt(ref.entries)} entries)`;
}

// Keep a tall or wide matrix readable: each cell at least a pixel, the box within the canvas.
function stretchBox(canvas, rows, cols) {
  const box = fitBox(canvas, rows, cols);
  if (box.w >= 24 && box.h >= 24) return box;
  const w = Math.min(canvas.width, Math.max(box.w, Math.min(canvas.width, cols * 8)));
  const h = Math.min(canvas.height, Math.max(box.h, Math.min(canvas.height, rows * 8)));
  return { x: (canvas.width - w) / 2, y: (canvas.height - h) / 2, w, h };
}

function refresh() {
  if (!image) return;
  const { ref, image: picture } = image;
  run(() => getJSON("/api/tokens", { ref, patch: Number($("patch-slider").value) }), (result) => draw(result, picture));
}

function load(ref) {
  image = null;
  getJSON("/api/image", { ref }).then((answer) => {
    if (ref !== picker.ref) return;
    image = { ref, image: decode(answer.image) };
    // Start at a patch that makes a 4x4 grid when the image allows it.
    const side = Math.min(answer.height, answer.width);
    const slider = $("patch-slider");
    slider.max = side;
    slider.value = Math.max(1, Math.floor(side / 4));
    refresh();
  }).catch((err) => { $("tokens-error").textContent = err.message; page.dataset.state = "error"; });
}

export function initTokens() {
  $("patch-slider").addEventListener("input", refresh);
  onImage(load);
  if (picker.ref) load(picker.ref);
}
