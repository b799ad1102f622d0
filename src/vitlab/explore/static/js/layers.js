// Small-multiple figures shared by the Attention and Runs pages: attention layer by layer (raw, mixed with the
// residual, rolled out, on one scale) and the all-patches grid of position similarities (one small map per
// patch, as in the ViT paper). Drawing only: the server computed every value.
import { colourBar, describe, drawOverlay, paintOutline, paintTiles, surface, tileHit } from "./draw.js";
import { prob, signed } from "./format.js";

const KINDS = [["raw", "raw"], ["mixed", "(A+I)/2"], ["rollout", "rollout"]];
const MARGIN = { left: 48, top: 16 };

// Raw, mixed and rolled-out attention of `answer` (/api/layers), decoded per kind {name: Float32Array (L, gh, gw)},
// as a grid of layers (rows) by kinds (columns) on one scale; returns the layout for highlights.
export function drawLayers(canvas, scaleBox, answer, kinds) {
  const [gh, gw] = answer.grid;
  const layers = answer.layers, cells = gh * gw;
  const values = new Float32Array(layers * KINDS.length * cells);
  for (let l = 0; l < layers; l++) {
    KINDS.forEach(([name], k) => values.set(kinds[name].subarray(l * cells, (l + 1) * cells),
      (l * KINDS.length + k) * cells));
  }
  const scale = { lo: 0, hi: answer.max || 1, map: "viridis" };
  const s = surface(canvas);
  const { ctx } = s;
  ctx.font = "11px system-ui, sans-serif";
  const margin = { ...MARGIN, left: Math.max(MARGIN.left, Math.ceil(ctx.measureText(`layer ${layers - 1}`).width) + 10) };
  const layout = paintTiles(s, values, layers, KINDS.length, gh, gw, scale, { ...margin, gap: 6 });
  ctx.fillStyle = "#3d4656";
  ctx.textAlign = "center";
  KINDS.forEach(([, label], k) => ctx.fillText(label, margin.left + (k + 0.5) * (layout.size + layout.gap), 11));
  ctx.textAlign = "right";
  for (let l = 0; l < layers; l++) ctx.fillText(`layer ${l}`, margin.left - 6, margin.top + l * (layout.size + 6) + 14);
  colourBar(scaleBox, scale, "attention weight on a patch (one scale for all three)", prob);
  const last = (name) => Math.max(...kinds[name].subarray((layers - 1) * cells));
  describe(canvas, `attention from the query, ${layers} layers by raw, (A + I) / 2 and rollout, one colour scale ` +
    `0 to ${prob(scale.hi)}; in the last layer the largest weight on a patch is ${prob(last("raw"))} raw and ` +
    `${prob(last("rollout"))} rolled out`);
  return { ...layout, gh, gw };
}

// The cosine similarity matrix (N, N) of a grid's positions as gh x gw small maps, map p being patch p's row.
export function drawPositionGrid(canvas, scaleBox, similarity, grid, facts = "") {
  const [gh, gw] = grid;
  const scale = { lo: -1, hi: 1, map: "diverging" };
  const s = surface(canvas);
  const gap = Math.max(2, Math.round(s.w / (gw * 14)));
  const layout = paintTiles(s, similarity, gh, gw, gh, gw, scale, { gap });
  colourBar(scaleBox, scale, "cosine similarity of two positions", signed);
  describe(canvas, `cosine similarity of the positions: ${gh} × ${gw} small maps, map p showing patch p's ` +
    `similarity to every patch, on −1 to +1${facts ? `; ${facts}` : ""}`);
  return { ...layout, gh, gw };
}

// Patch `patch` lit in every small map of `layout` (and, in a position grid, the map of that patch framed).
export function lightTiles(canvas, layout, patch, frameMap = false) {
  drawOverlay(canvas, (s) => {
    if (!layout || patch === null || patch < 0) return;
    const { gh, gw, size, gap, left, top, rows, cols } = layout;
    for (let t = 0; t < rows * cols; t++) {
      const box = { x: left + (t % cols) * (size + gap), y: top + Math.floor(t / cols) * (size + gap), w: size, h: size };
      paintOutline(s, box, gh, gw, patch, "#ff2d55", 1.5);
      if (frameMap && t === patch) paintOutline(s, box, 1, 1, 0, "#111", 2);
    }
  });
  canvas.dataset.highlight = patch ?? "";
}

// The patch of a small-map grid under (x, y): the cell of the map hovered, or -1.
export function tilePatch(layout) {
  const which = tileHit(layout);
  return (x, y) => {
    const t = which(x, y);
    if (t < 0) return -1;
    const { size, gap, left, top, cols, gh, gw } = layout;
    const u = (x - left - (t % cols) * (size + gap)) / size, v = (y - top - Math.floor(t / cols) * (size + gap)) / size;
    if (u >= 1 || v >= 1) return -1;
    return Math.floor(v * gh) * gw + Math.floor(u * gw);
  };
}
