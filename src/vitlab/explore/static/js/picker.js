// The image picker shared by the Tokens and Attention pages: a sample source, its thumbnails,
// or an uploaded PNG / JPEG. Listeners hear the new image reference ("digits:3", "upload:ab12...").
import { $, decode, getJSON, postFile } from "./api.js";
import { drawImage } from "./draw.js";

const THUMBS = 24;
const listeners = [];
export const picker = { ref: null };

export function onImage(listener) {
  listeners.push(listener);
}

function choose(ref, caption) {
  picker.ref = ref;
  $("picker-current").textContent = caption;
  listeners.forEach((listener) => listener(ref));
}

async function showSource(name) {
  const box = $("picker-thumbs");
  box.replaceChildren();
  $("picker-error").textContent = "";
  try {
    const page = await getJSON(`/api/samples/${encodeURIComponent(name)}`, { count: THUMBS });
    const images = decode(page.images);
    const [n, c, h, w] = images.shape;
    page.index.forEach((index, k) => {
      const canvas = document.createElement("canvas");
      canvas.width = w; canvas.height = h;
      canvas.title = `${name} #${index}: ${page.labels[k]}`;
      canvas.dataset.ref = `${name}:${index}`;
      drawImage(canvas, { shape: [c, h, w], data: images.data.subarray(k * c * h * w, (k + 1) * c * h * w) });
      canvas.addEventListener("click", () => select(canvas, `${name} #${index} (label ${page.labels[k]}, ${h}×${w})`));
      box.append(canvas);
    });
    select(box.firstChild, `${name} #${page.index[0]} (label ${page.labels[0]}, ${h}×${w})`);
  } catch (err) {
    $("picker-error").textContent = err.message;
  }
}

function select(canvas, caption) {
  for (const other of $("picker-thumbs").children) other.classList.toggle("selected", other === canvas);
  choose(canvas.dataset.ref, caption);
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
  $("picker-upload").addEventListener("change", async (event) => {
    const file = event.target.files[0];
    if (!file) return;
    $("picker-error").textContent = "";
    try {
      const upload = await postFile("/api/uploads", file);
      for (const other of $("picker-thumbs").children) other.classList.remove("selected");
      const channels = upload.channels === 1 ? "greyscale" : "RGB";
      choose(upload.ref, `${upload.filename} (${upload.height}×${upload.width}, ${channels})`);
    } catch (err) {
      $("picker-error").textContent = err.message;
    }
    event.target.value = "";
  });
  const first = info.samples.find((s) => s.available);
  if (first) {
    select.value = first.name;
    showSource(first.name);
  }
}
