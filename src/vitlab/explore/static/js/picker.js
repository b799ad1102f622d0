// The image picker shared by the Tokens, Attention and Forward pages: a sample source and its thumbnails, an
// uploaded PNG / JPEG, or a digit drawn on the pad (with a pointer, or from the keyboard). Listeners hear the
// new image reference ("digits:3", "upload:ab12..."), which is also kept in the URL. Until the user chooses
// an image (or the URL names one), each page may ask for the samples it reads best (`follow`). The
// thumbnails are made by `thumbnails`, which the Segment and Limits pages use too.
import { $, decode, getJSON, postFile } from "./api.js";
import { arrowKeys, roving } from "./cursor.js";
import { drawImage, drawOverlay, surface } from "./draw.js";
import { remember, setting } from "./state.js";

const THUMBS = 24;
const PAD_INK = 14;             // stroke width on the 112-pixel pad: about a pixel of an 8x8 digit, 3 of a 28x28
const PAD = 112;               // the pad's side in CSS pixels
const PEN_STEP = 8;            // pixels the keyboard moves the pen
const listeners = [];
export const picker = { ref: null, source: null, chosen: false, available: [] };

export function onImage(listener) {
  listeners.push(listener);
}

function choose(ref, caption) {
  picker.ref = ref;
  picker.source = ref.split(":")[0];
  $("picker-current").textContent = caption;
  remember({ ref });
  listeners.forEach((listener) => listener(ref));
}

function thumbButtons(box = $("picker-thumbs")) {
  return [...box.querySelectorAll("button")];
}

// Thumbnail `button` of `box` pressed (the others not) and in the Tab order; none pressed for null.
export function press(button, box = $("picker-thumbs")) {
  const buttons = thumbButtons(box);
  buttons.forEach((other) => other.setAttribute("aria-pressed", String(other === button)));
  roving(buttons, Math.max(0, buttons.indexOf(button)));
}

// A thumbnail button in `box` for each image of `images` {shape: [M, C, H, W], data}, named `names[k]`;
// a click presses it and calls `onChoose(k)`. Returns the buttons.
export function thumbnails(box, images, names, onChoose) {
  box.replaceChildren();
  const [, c, h, w] = images.shape;
  names.forEach((name, k) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "thumb";
    button.setAttribute("aria-label", name);
    const canvas = document.createElement("canvas");
    canvas.width = w; canvas.height = h;
    canvas.classList.add("fluid");
    canvas.setAttribute("aria-hidden", "true");
    drawImage(canvas, { shape: [c, h, w], data: images.data.subarray(k * c * h * w, (k + 1) * c * h * w) });
    button.append(canvas);
    button.addEventListener("click", () => {
      press(button, box);
      onChoose(k);
    });
    box.append(button);
  });
  return thumbButtons(box);
}

// The thumbnails of `name` from `start`; chooses image `wanted` (an index) when given, else the first.
async function showSource(name, start = 0, wanted = null) {
  const box = $("picker-thumbs");
  box.replaceChildren();
  $("picker-error").textContent = "";
  try {
    const page = await getJSON(`/api/samples/${encodeURIComponent(name)}`, { start, count: THUMBS });
    const images = decode(page.images);
    const [, , h, w] = images.shape;
    const buttons = thumbnails(box, images, page.index.map((index, k) => `${name} #${index}, label ${page.labels[k]}`),
      (k) => { clearPad(); choose(`${name}:${page.index[k]}`, `${name} #${page.index[k]} (label ${page.labels[k]}, ${h}×${w})`); });
    buttons.forEach((button) => button.addEventListener("click", () => { picker.chosen = true; }));
    page.index.forEach((index, k) => { buttons[k].dataset.ref = `${name}:${index}`; });
    const first = wanted === null ? 0 : Math.max(0, page.index.indexOf(wanted));
    const chosen = picker.chosen;
    buttons[first].click();
    picker.chosen = chosen;       // showing a source's first image is not the user's choice
  } catch (err) {
    $("picker-error").textContent = err.message;
  }
}

async function upload(file, caption, drawn = false) {
  $("picker-error").textContent = "";
  try {
    const answer = await postFile("/api/uploads", file);
    picker.chosen = true;
    if (!drawn) clearPad();
    press(null);
    const channels = answer.channels === 1 ? "greyscale" : "RGB";
    choose(answer.ref, `${caption || answer.filename} (${answer.height}×${answer.width}, ${channels})`);
  } catch (err) {
    $("picker-error").textContent = err.message;
  }
}

// The drawing pad: white ink on black, as the digits were written; the drawing is sent when the pen lifts.
const pen = { at: [PAD / 2, PAD / 2], drawn: false };

function clearPad() {
  const s = surface($("pad"));
  s.ctx.fillStyle = "#000";
  s.ctx.fillRect(0, 0, s.w, s.h);
  pen.drawn = false;
  showPen();
}

function ink(ctx) {
  Object.assign(ctx, { strokeStyle: "#fff", lineWidth: PAD_INK, lineCap: "round", lineJoin: "round" });
}

// The keyboard's pen position, shown on the pad's overlay while the pad has the focus.
function showPen() {
  const pad = $("pad");
  drawOverlay(pad, (s) => {
    if (document.activeElement !== pad) return;
    s.ctx.strokeStyle = "#ff2d55";
    s.ctx.lineWidth = 2;
    s.ctx.strokeRect(pen.at[0] - PAD_INK / 2, pen.at[1] - PAD_INK / 2, PAD_INK, PAD_INK);
  });
}

async function sendPad() {
  if (!pen.drawn) return;
  const copy = new OffscreenCanvas(PAD, PAD);
  copy.getContext("2d").drawImage($("pad"), 0, 0, PAD, PAD);
  await upload(await copy.convertToBlob({ type: "image/png" }), "your drawing", true);
}

// Arrow keys move the pen (with Shift they draw a line), Space draws a dot, Enter reads the digit.
function padKeys(event) {
  const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
  const ctx = $("pad").getContext("2d");
  if (event.key in moves) {
    event.preventDefault();
    const [dx, dy] = moves[event.key];
    const from = pen.at;
    pen.at = [Math.min(PAD, Math.max(0, from[0] + dx * PEN_STEP)), Math.min(PAD, Math.max(0, from[1] + dy * PEN_STEP))];
    if (event.shiftKey) {
      ink(ctx);
      ctx.beginPath(); ctx.moveTo(...from); ctx.lineTo(...pen.at); ctx.stroke();
      pen.drawn = true;
    }
    showPen();
  } else if (event.key === " ") {
    event.preventDefault();
    ink(ctx);
    ctx.beginPath(); ctx.moveTo(...pen.at); ctx.lineTo(pen.at[0] + 0.01, pen.at[1]); ctx.stroke();
    pen.drawn = true;
  } else if (event.key === "Enter") {
    event.preventDefault();
    sendPad();
  }
}

function initPad() {
  const pad = $("pad");
  pad.tabIndex = 0;
  clearPad();
  const point = (event) => {
    const rect = pad.getBoundingClientRect();
    return [((event.clientX - rect.left) * PAD) / rect.width, ((event.clientY - rect.top) * PAD) / rect.height];
  };
  let drawing = false;
  pad.addEventListener("pointerdown", (event) => {
    drawing = true;
    pad.setPointerCapture(event.pointerId);
    const ctx = pad.getContext("2d");
    const [x, y] = point(event);
    ink(ctx);
    ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + 0.01, y); ctx.stroke();
    pen.drawn = true;
  });
  pad.addEventListener("pointermove", (event) => {
    if (!drawing) return;
    const ctx = pad.getContext("2d");
    const [x, y] = point(event);
    ctx.lineTo(x, y); ctx.stroke();
  });
  const finish = async () => {
    if (!drawing) return;
    drawing = false;
    await sendPad();
  };
  pad.addEventListener("pointerup", finish);
  pad.addEventListener("pointercancel", finish);
  pad.addEventListener("keydown", padKeys);
  pad.addEventListener("focus", showPen);
  pad.addEventListener("blur", showPen);
  $("pad-clear").addEventListener("click", clearPad);
  $("pad-send").addEventListener("click", sendPad);
  $("pad-box").open = window.matchMedia("(min-width: 601px)").matches;
}

// Show `source`'s samples unless the user has chosen an image (or the URL named one): the page shown now
// reads them best (its model's dataset, or the texts' Fashion-MNIST on the Tokens page).
export function follow(source) {
  if (picker.chosen || !source || source === picker.source || !picker.available.includes(source)) return;
  $("picker-source").value = source;
  showSource(source);
}

export function initPicker(info, preferred = null) {
  const select = $("picker-source");
  // the pad draws a digit: offered when no model is loaded (the Tokens page reads any picture) or one reads digits
  $("pad-box").hidden = info.models.length > 0 && !info.models.some((m) => m.reads_digits);
  for (const source of info.samples) {
    const option = new Option(source.available ? source.name : `${source.name} (not found)`, source.name);
    option.disabled = !source.available;
    option.title = source.reason || source.description;
    select.append(option);
  }
  select.addEventListener("change", () => { picker.chosen = true; showSource(select.value); });
  arrowKeys($("picker-thumbs"), "button", () => 1);
  $("picker-upload").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (file) await upload(file);
    event.target.value = "";
  });
  initPad();
  const [source, key] = (setting("ref") || "").split(":");
  const available = info.samples.filter((s) => s.available).map((s) => s.name);
  picker.available = available;
  if (source === "upload" && key) {
    picker.chosen = true;
    choose(`upload:${key}`, "your upload");
  } else if (available.includes(source) && /^\d+$/.test(key || "")) {
    picker.chosen = true;
    const index = Number(key);
    select.value = source;
    showSource(source, index - (index % THUMBS), index);
  } else if (available.length) {
    const first = available.includes(preferred) ? preferred : available[0];
    select.value = first;
    showSource(first);
  }
}
