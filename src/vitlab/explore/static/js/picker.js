// The image picker shared by the Tokens and Attention pages: a sample source and its thumbnails, an
// uploaded PNG / JPEG, or a digit drawn on the pad. Listeners hear the new image reference
// ("digits:3", "upload:ab12..."), which is also kept in the URL. The thumbnails are made by
// `thumbnails`, which the Segment page uses for its held-out images too.
import { $, decode, getJSON, postFile } from "./api.js";
import { arrowKeys, roving } from "./cursor.js";
import { drawImage, surface } from "./draw.js";
import { remember, setting } from "./state.js";

const THUMBS = 24;
const PAD_INK = 14;             // stroke width on the 112-pixel pad: about a pixel of an 8x8 digit, 3 of a 28x28
const listeners = [];
export const picker = { ref: null };

export function onImage(listener) {
  listeners.push(listener);
}

function choose(ref, caption) {
  picker.ref = ref;
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
      (k) => choose(`${name}:${page.index[k]}`, `${name} #${page.index[k]} (label ${page.labels[k]}, ${h}×${w})`));
    page.index.forEach((index, k) => { buttons[k].dataset.ref = `${name}:${index}`; });
    const first = wanted === null ? 0 : Math.max(0, page.index.indexOf(wanted));
    buttons[first].click();
  } catch (err) {
    $("picker-error").textContent = err.message;
  }
}

async function upload(file, caption) {
  $("picker-error").textContent = "";
  try {
    const answer = await postFile("/api/uploads", file);
    press(null);
    const channels = answer.channels === 1 ? "greyscale" : "RGB";
    choose(answer.ref, `${caption || answer.filename} (${answer.height}×${answer.width}, ${channels})`);
  } catch (err) {
    $("picker-error").textContent = err.message;
  }
}

// The drawing pad: white ink on black, as the digits were written; the drawing is sent when the pen lifts.
function initPad() {
  const pad = $("pad");
  const clear = () => {
    const s = surface(pad);
    s.ctx.fillStyle = "#000";
    s.ctx.fillRect(0, 0, s.w, s.h);
  };
  clear();
  const point = (event) => {
    const rect = pad.getBoundingClientRect();
    return [((event.clientX - rect.left) * 112) / rect.width, ((event.clientY - rect.top) * 112) / rect.height];
  };
  let drawing = false;
  pad.addEventListener("pointerdown", (event) => {
    drawing = true;
    pad.setPointerCapture(event.pointerId);
    const ctx = pad.getContext("2d");
    const [x, y] = point(event);
    Object.assign(ctx, { strokeStyle: "#fff", lineWidth: PAD_INK, lineCap: "round", lineJoin: "round" });
    ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + 0.01, y); ctx.stroke();
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
    const copy = new OffscreenCanvas(112, 112);
    copy.getContext("2d").drawImage(pad, 0, 0, 112, 112);
    await upload(await copy.convertToBlob({ type: "image/png" }), "your drawing");
  };
  pad.addEventListener("pointerup", finish);
  pad.addEventListener("pointercancel", finish);
  $("pad-clear").addEventListener("click", clear);
}

export function initPicker(info) {
  const select = $("picker-source");
  for (const source of info.samples) {
    const option = new Option(source.available ? source.name : `${source.name} (needs --data-dir)`, source.name);
    option.disabled = !source.available;
    option.title = source.reason || source.description;
    select.append(option);
  }
  select.addEventListener("change", () => showSource(select.value));
  arrowKeys($("picker-thumbs"), "button", () => 1);
  $("picker-upload").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (file) await upload(file);
    event.target.value = "";
  });
  initPad();
  const [source, key] = (setting("ref") || "").split(":");
  const available = info.samples.filter((s) => s.available).map((s) => s.name);
  if (source === "upload" && key) {
    choose(`upload:${key}`, "your upload");
  } else if (available.includes(source) && /^\d+$/.test(key || "")) {
    const index = Number(key);
    select.value = source;
    showSource(source, index - (index % THUMBS), index);
  } else if (available.length) {
    select.value = available[0];
    showSource(available[0]);
  }
}
