// Segment page: a promptable run's model on one of its held-out shapes images or on an upload. A click adds a
// point (foreground or background), a drag draws a box; the keyboard moves over the pixels and Enter does the
// same (a box takes two corners). The server answers K candidate masks with their predicted IoU (on held-out
// images also the actual IoU with the object prompted); the best is overlaid and any other can be chosen.
import { $, announce, decode, getJSON, latest, postFile, setState } from "./api.js";
import { arrowKeys, cursor, gridHit, itemAt } from "./cursor.js";
import { drawOverlay, facts, makeCanvas, paintImage, paintMask, paintOutline, paintPrompt, surface } from "./draw.js";
import { count, prob } from "./format.js";
import { press, thumbnails } from "./picker.js";
import { remember, setting } from "./state.js";

const page = $("page-segment");
const runDetail = latest(page, $("segment-error"));
const runSegment = latest($("seg-answer"), $("seg-answer-error"));
const HELD_OUT = "held-out";
const MAX_POINTS = 8;         // the server's limit: the oldest point makes way for a new one
const LABELS = { foreground: 1, background: 0 };
const state = { run: null, detail: null, ref: null, image: null, fresh: false, box: null, mode: "foreground",
  prompt: { points: [], labels: [], rect: null }, corner: null, answer: null, masks: null, shown: 0, drag: null,
  dragged: false };
let chooseRun = null;         // set when the page starts

const size = () => state.image.shape.slice(1);   // [H, W]
const pixel = (k) => [k % size()[1], Math.floor(k / size()[1])];
const empty = (prompt) => !prompt.points.length && !prompt.rect;
const fits = (prompt, [h, w]) => prompt.points.every(([x, y]) => x < w && y < h) && (!prompt.rect ||
  (prompt.rect[2] <= w && prompt.rect[3] <= h));

// The box with corners at pixels a and b, both included: [x0, y0, x1, y1] with x1, y1 exclusive.
function boxOf(a, b) {
  return [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[0], b[0]) + 1, Math.max(a[1], b[1]) + 1];
}

function wire(prompt) {
  return {
    points: prompt.points.map((p) => p.join(",")).join(";") || null,
    labels: prompt.points.length ? prompt.labels.join(",") : null,
    box: prompt.rect ? prompt.rect.join(",") : null,
  };
}

// The answer for the image and prompt shown now, or null (none yet, or one for an earlier image).
function current() {
  const a = state.answer;
  return a && a.ref === state.ref && !empty(state.prompt) ? a : null;
}

// The image, the overlaid mask and the prompt; the canvas states the mask's area and the candidate shown.
function drawMain() {
  const canvas = $("seg-image");
  if (!state.image) return;
  const [h, w] = size();
  const s = surface(canvas);
  state.box = paintImage(s, state.image);
  const a = current();
  const mask = a ? state.masks.subarray(state.shown * h * w, (state.shown + 1) * h * w) : null;
  if (mask) paintMask(s, mask, h, w, state.box);
  paintPrompt(s, state.box, h, w, state.prompt);
  const centre = Math.floor(h / 2) * w + Math.floor(w / 2);
  pixelCursor.layout(h * w, w, gridHit(state.box, h, w), state.fresh ? centre : undefined);  // a new image: its centre
  state.fresh = false;
  canvas.dataset.maskArea = a ? a.areas[state.shown] : "";
  canvas.dataset.candidate = a ? state.shown : "";
  $("seg-caption").textContent = a
    ? `candidate ${state.shown + 1} of ${a.iou.length} overlaid in blue, predicted IoU ${prob(a.iou[state.shown])}`
    : empty(state.prompt) ? "the image: click an object" : "the image and the prompt";
  lightPixel(null);
}

// The pixel under the pointer or keyboard, a box being dragged, or a box's first corner, on the overlay.
function lightPixel(k) {
  if (!state.box) return;
  const [h, w] = size();
  drawOverlay($("seg-image"), (s) => {
    const drag = state.drag;
    if (drag && drag.end) paintPrompt(s, state.box, h, w, { rect: boxOf(drag.start, drag.end) });
    if (state.corner) paintOutline(s, state.box, h, w, state.corner[1] * w + state.corner[0], "#ffd700", 2);
    if (k !== null) paintOutline(s, state.box, h, w, k, "#ff2d55", 2);
  });
}

function drawCandidates(a) {
  const box = $("seg-candidates");
  box.replaceChildren();
  if (!a) return;
  const [h, w] = size();
  const masks = state.masks;
  a.iou.forEach((iou, k) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "candidate";
    button.setAttribute("aria-pressed", String(k === state.shown));
    button.tabIndex = k === state.shown ? 0 : -1;
    const actual = a.truth ? `, actual IoU ${prob(a.truth.iou[k])}` : "";
    // Candidates come ranked by predicted IoU; the one that really fits best may be another.
    const bestActual = a.truth ? a.truth.iou.indexOf(Math.max(...a.truth.iou)) : -1;
    const notes = [k === 0 ? "highest predicted IoU" : null, k === bestActual ? "highest actual IoU" : null]
      .filter(Boolean);
    const words = `candidate ${k + 1}${notes.length ? ` (${notes.join("; ")})` : ""}: predicted IoU ${prob(iou)}` +
      `${actual}, ${count(a.areas[k])} pixels`;
    const canvas = makeCanvas(96, 96);
    canvas.setAttribute("aria-hidden", "true");
    const s = surface(canvas);
    paintMask(s, masks.subarray(k * h * w, (k + 1) * h * w), h, w, paintImage(s, state.image));
    const caption = document.createElement("span");
    caption.textContent = words;
    button.append(canvas, caption);
    button.addEventListener("click", () => {
      state.shown = k;
      for (const other of box.querySelectorAll("button")) {
        other.setAttribute("aria-pressed", String(other === button));
      }
      drawMain();
      drawFacts(a);
      announce(words);
    });
    box.append(button);
  });
}

function drawFacts(a) {
  const d = state.detail;
  const rows = [["model", `${d.masks} candidates from ${count(d.params)} parameters, ${d.image_size}×${d.image_size}` +
    ` input (${d.checkpoint})`]];
  if (a) {
    const k = state.shown;
    rows.push(["overlaid", `candidate ${k + 1}: predicted IoU ${prob(a.iou[k])}, ${count(a.areas[k])} pixels`]);
    if (a.truth) {
      rows.push(["object prompted", `${a.truth.class ?? "object"} #${a.truth.object}, ${count(a.truth.area)} pixels`],
        ["actual IoU of the overlaid mask", prob(a.truth.iou[k])],
        ["best actual IoU among the candidates", prob(Math.max(...a.truth.iou))]);
    } else {
      rows.push(["actual IoU", state.ref.startsWith(HELD_OUT)
        ? "no object under the first foreground point" : "unknown: an upload has no true mask"]);
    }
  }
  facts($("seg-facts"), rows);
}

function segmentNow() {
  const prompt = state.prompt;
  remember({ pts: wire(prompt).points, plab: wire(prompt).labels, pbox: wire(prompt).box });
  if (empty(prompt)) {
    state.answer = null;
    drawMain();
    drawCandidates(null);
    drawFacts(null);
    return;
  }
  const name = encodeURIComponent(state.run);
  runSegment(() => getJSON(`/api/prompt/runs/${name}/segment`, { ref: state.ref, ...wire(prompt) }), (a) => {
    state.answer = a;
    state.masks = decode(a.masks).data;
    state.shown = 0;
    drawMain();
    drawCandidates(a);
    drawFacts(a);
    const truth = a.truth ? `, actual ${prob(a.truth.iou[0])}` : "";
    announce(`highest predicted of ${a.iou.length} candidates: predicted IoU ${prob(a.iou[0])}${truth}, ` +
      `${count(a.areas[0])} pixels`);
  });
}

// Show image `ref` ({shape: [C, H, W], data}); the prompt is kept where it still fits.
function showImage(ref, image, caption) {
  state.ref = ref;
  state.image = image;
  state.fresh = true;
  remember({ pref: ref });
  $("seg-current").textContent = caption;
  if (!fits(state.prompt, size())) state.prompt = { points: [], labels: [], rect: null };
  state.corner = null;
  drawMain();
  segmentNow();
}

function heldOutCaption(k) {
  const held = state.detail.held_out;
  const objects = `${held.objects[k]} object${held.objects[k] === 1 ? "" : "s"}`;
  return `held-out #${k} (${objects}): one of ${held.objects.length} shapes images generated ` +
    `with seed ${held.seed}; the run's data used seed ${state.detail.seed}, so the model never saw it`;
}

// The image named `ref`: a held-out one of the run, else one the server keeps (an upload).
async function openImage(ref) {
  const [source, key] = ref.split(":");
  const held = state.detail.held_out;
  const buttons = [...$("seg-thumbs").querySelectorAll("button")];
  if (source === HELD_OUT) {
    if (held) buttons[Number(key) < buttons.length ? Number(key) : 0].click();
    return;
  }
  press(null, $("seg-thumbs"));
  try {
    const answer = await getJSON("/api/image", { ref });
    showImage(ref, decode(answer.image), `${ref} (${answer.height}×${answer.width})`);
  } catch (err) {
    $("segment-error").textContent = err.message;
  }
}

function drawDetail(d, wanted) {
  state.detail = d;
  const box = $("seg-thumbs");
  box.replaceChildren();
  if (d.held_out) {
    const images = decode(d.held_out.images);
    thumbnails(box, images, d.held_out.objects.map((n, k) => `held-out #${k}, ${n} object${n === 1 ? "" : "s"}`),
      (k) => showImage(`${HELD_OUT}:${k}`, { shape: images.shape.slice(1),
        data: images.data.subarray(k * 3 * d.image_size ** 2, (k + 1) * 3 * d.image_size ** 2) }, heldOutCaption(k)));
  }
  const ref = wanted || (d.held_out ? `${HELD_OUT}:0` : null);
  if (ref) openImage(ref);
  else $("seg-current").textContent = "This run was not trained on shapes: upload an image to prompt.";
}

function place(k) {
  if (state.dragged) { state.dragged = false; return; }
  const xy = pixel(k);
  const prompt = state.prompt;
  if (state.mode === "box") {
    if (!state.corner) {
      state.corner = xy;
      lightPixel(k);
      announce(`first corner at pixel ${xy[0]}, ${xy[1]}: choose the opposite corner`);
      return;
    }
    state.prompt = { ...prompt, rect: boxOf(state.corner, xy) };
    state.corner = null;
  } else {
    const keep = prompt.points.length >= MAX_POINTS ? 1 : 0;
    state.prompt = { ...prompt, points: [...prompt.points.slice(keep), xy],
      labels: [...prompt.labels.slice(keep), LABELS[state.mode]] };
  }
  segmentNow();
}

const pixelCursor = cursor($("seg-image"), {
  label: "prompt position (arrow keys move, Enter adds a point or a box corner)",
  describe: (k) => {
    if (!state.image) return `pixel ${k}`;
    const [x, y] = pixel(k);
    const a = current();
    const [h, w] = size();
    const inside = a ? (state.masks[state.shown * h * w + k] > 0.5 ? ", inside the mask" : ", outside the mask") : "";
    return `pixel x ${x}, y ${y}${inside}`;
  },
  onMove: lightPixel,
  onPick: place,
});

// A drag across the image draws a box (in any mode); the click that ends it adds nothing.
function initDrag() {
  const canvas = $("seg-image");
  const at = (event) => {
    const k = state.box ? itemAt(event, canvas, gridHit(state.box, ...size())) : -1;
    return k < 0 ? null : pixel(k);
  };
  canvas.addEventListener("pointerdown", (event) => {
    const start = at(event);
    if (!start) return;
    state.drag = { start, end: null };
    canvas.setPointerCapture(event.pointerId);
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!state.drag) return;
    const end = at(event);
    if (end) state.drag.end = end;
    lightPixel(null);
  });
  canvas.addEventListener("pointerup", () => {
    const drag = state.drag;
    state.drag = null;
    const moved = drag && drag.end ? Math.max(...drag.end.map((v, i) => Math.abs(v - drag.start[i]))) : 0;
    if (moved < 2) return;
    state.dragged = true;
    setTimeout(() => { state.dragged = false; });    // after the click this pointerup fires, if any
    state.corner = null;
    state.prompt = { ...state.prompt, rect: boxOf(drag.start, drag.end) };
    segmentNow();
  });
}

function setMode(mode) {
  state.mode = mode;
  state.corner = null;
  for (const button of document.querySelectorAll("#page-segment .modes button")) {
    button.setAttribute("aria-pressed", String(button.dataset.mode === mode));
  }
  lightPixel(null);
}

async function upload(file) {
  $("segment-error").textContent = "";
  try {
    const answer = await postFile("/api/uploads", file);
    press(null, $("seg-thumbs"));
    const channels = answer.channels === 1 ? "greyscale" : "RGB";
    showImage(answer.ref, decode(answer.image), `${answer.filename} (${answer.height}×${answer.width}, ${channels})`);
  } catch (err) {
    $("segment-error").textContent = err.message;
  }
}

// The prompt in the URL: pts=x,y;x,y plab=1,0 pbox=x0,y0,x1,y1.
function promptFromURL() {
  const numbers = (text) => (text ? text.split(",").map(Number) : []);
  const points = (setting("pts") || "").split(";").filter(Boolean).map(numbers);
  const labels = numbers(setting("plab"));
  const rect = numbers(setting("pbox"));
  const ok = points.every((p) => p.length === 2 && p.every(Number.isInteger)) && labels.length === points.length;
  return { points: ok ? points : [], labels: ok ? labels : [], rect: rect.length === 4 ? rect : null };
}

export function openPromptRun(name) {
  if (chooseRun) chooseRun(name);
}

export async function initSegment() {
  const select = $("seg-run");
  let listing;
  try {
    listing = await getJSON("/api/prompt/runs");
  } catch (err) {
    $("segment-error").textContent = err.message;
    setState(page, "error");
    return;
  }
  for (const run of listing.runs) {
    const score = run.test.point_miou === undefined ? "" : ` (test IoU from a point ${prob(run.test.point_miou)})`;
    const option = new Option(run.broken ? `${run.name} (cannot be read)` : `${run.name}${score}`, run.name);
    option.disabled = Boolean(run.broken);
    option.title = run.broken || "";
    select.append(option);
  }
  const usable = listing.runs.filter((r) => !r.broken).map((r) => r.name);
  if (!usable.length) {
    $("segment-none").hidden = false;
    setState(page, "ready");
    return;
  }
  state.prompt = promptFromURL();
  chooseRun = (name, ref = state.ref) => {
    state.run = name;
    select.value = name;
    remember({ prun: name });
    runDetail(() => getJSON(`/api/prompt/runs/${encodeURIComponent(name)}`), (d) => drawDetail(d, ref));
  };
  select.addEventListener("change", () => chooseRun(select.value));
  for (const button of document.querySelectorAll("#page-segment .modes button")) {
    button.addEventListener("click", () => setMode(button.dataset.mode));
  }
  $("seg-clear").addEventListener("click", () => {
    state.prompt = { points: [], labels: [], rect: null };
    state.corner = null;
    segmentNow();
    announce("prompt cleared");
  });
  $("seg-upload").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (file) await upload(file);
    event.target.value = "";
  });
  arrowKeys($("seg-thumbs"), "button", () => 1);
  arrowKeys($("seg-candidates"), "button", () => 1);
  initDrag();
  const wanted = setting("prun");
  chooseRun(usable.includes(wanted) ? wanted : usable[0], setting("pref"));
}
