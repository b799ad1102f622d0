// Talking to the explorer's server: JSON requests, encoded tensors, page states.
// The server computes every number; this module only fetches and decodes.

export class ApiError extends Error {}

export async function getJSON(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) query.set(key, value);
  }
  const url = query.toString() ? `${path}?${query}` : path;
  return answer(await fetch(url));
}

export async function postFile(path, file) {
  const form = new FormData();
  form.append("file", file);
  return answer(await fetch(path, { method: "POST", body: form }));
}

async function answer(response) {
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(body.error || `${response.status} ${response.statusText}`);
  return body;
}

// {"shape": [...], "data": base64 float32 little-endian} -> {shape, data: Float32Array}
export function decode(encoded) {
  const binary = atob(encoded.data);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return { shape: encoded.shape, data: new Float32Array(bytes.buffer) };
}

// Run `request` for a page, keeping only the latest answer: a slider fires many requests, and an
// older one that returns late must not overwrite a newer one. The page element's data-state says
// "loading", "ready" or "error" (tests and the benchmark wait on it).
export function latest(page, errorBox) {
  let counter = 0;
  return async (request, draw) => {
    const ticket = ++counter;
    page.dataset.state = "loading";
    try {
      const result = await request();
      if (ticket !== counter) return;
      draw(result);
      errorBox.textContent = "";
      page.dataset.state = "ready";
    } catch (err) {
      if (ticket !== counter) return;
      errorBox.textContent = err.message;
      page.dataset.state = "error";
    }
  };
}

export function $(id) {
  return document.getElementById(id);
}

// Numbers as the pages print them (formatting only: the values come from the server).
export function fmt(value, digits = 4) {
  if (value === null || value === undefined) return "–";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return value.toLocaleString("en");
  const size = Math.abs(value);
  if (size !== 0 && (size >= 1e6 || size < 1e-3)) return value.toExponential(2);
  return value.toFixed(digits);
}
