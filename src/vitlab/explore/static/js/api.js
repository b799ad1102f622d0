// Talking to the explorer's server: JSON requests, encoded tensors, the state of each part of a page.
// The server computes every number; this module only fetches and decodes.

export class ApiError extends Error {}

export async function getJSON(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, value);
  }
  const url = query.toString() ? `${path}?${query}` : path;
  return answer(await fetch(url));
}

export async function postFile(path, file, name = "image.png") {
  const form = new FormData();
  form.append("file", file, file.name || name);
  return answer(await fetch(path, { method: "POST", body: form }));
}

// POST `body` as JSON (the browser adds the page's Origin, which the server requires for a POST).
export async function postJSON(path, body = {}) {
  return answer(await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body) }));
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

// Names for the loaded models, told apart: "vit-digits (learned)", and where two would read the same,
// the end of their paths as well ("vit-digits (learned) — a/best", "vit-digits (learned) — b/best").
export function modelLabels(models) {
  const base = models.map((m) => `${m.model} (${m.pos_embed ?? "no positions"})`);
  return models.map((m, i) => {
    const twins = models.filter((_, j) => base[j] === base[i]);
    if (twins.length < 2) return base[i];
    const parts = twins.map((t) => t.file.split("/").filter(Boolean));
    let depth = 1;
    const tail = (p) => p.slice(-depth).join("/");
    while (depth < Math.max(...parts.map((p) => p.length)) && new Set(parts.map(tail)).size < parts.length) depth++;
    return `${base[i]} — ${tail(m.file.split("/").filter(Boolean))}`;
  });
}

export function $(id) {
  return document.getElementById(id);
}

// Say `text` in the page's polite live region (results), once the current one has been read.
let pending = null;
export function announce(text) {
  clearTimeout(pending);
  pending = setTimeout(() => { $("announce").textContent = text; }, 250);
}

// A page's state is its parts' (".unit" elements, the page itself among them when it runs requests of its own):
// error if one failed, loading while one loads. Each part's own state is kept in data-own, so that the page's
// combined state never stands in for its own.
function settlePage(unit) {
  const page = unit.closest(".page");
  if (!page) return;
  const units = [...(page.classList.contains("unit") ? [page] : []), ...page.querySelectorAll(".unit")];
  const states = units.map((u) => u.dataset.own || u.dataset.state);
  page.dataset.state = states.includes("error") ? "error" : states.includes("loading") ? "loading" : "ready";
}

// Part `unit` of a page (or the page) is now "loading", "ready" or "error"; the page's state follows.
export function setState(unit, state) {
  unit.dataset.own = state;
  if (!unit.classList.contains("page")) unit.dataset.state = state;
  settlePage(unit);
}

// Run `request` for one part of a page (`unit`), keeping only the latest answer: a slider fires many
// requests, and an older one that returns late must not overwrite a newer one. The unit's data-state
// says "loading", "ready" or "error" (tests and the benchmark wait on it). An error is shown in
// `errorBox` (next to the controls that caused it, role=alert so it is announced) and the unit's
// figures, now stale, are hidden until an answer draws them again.
export function latest(unit, errorBox) {
  const run = inPieces(unit, errorBox);
  return (request, draw) => run([request], (result) => draw(result));
}

// `latest` for a part of a page asked for in pieces (one map, one curve: each a request the server answers in
// seconds where the whole would take a minute): the pieces are requested one after another, each drawn as it
// arrives (`draw(answer, i)`), and `line` says how far it is ("2 of 5 maps…") until the last one is drawn. The
// unit stays "loading" until then; its data-progress ("2/5") says how many pieces of the latest run are drawn.
export function inPieces(unit, errorBox, line = null) {
  let counter = 0;
  return async (requests, draw, noun = "pieces") => {
    const ticket = ++counter;
    const progress = (done) => {
      unit.dataset.progress = `${done}/${requests.length}`;
      if (line) line.textContent = done < requests.length ? `${done} of ${requests.length} ${noun}…` : "";
    };
    setState(unit, "loading");
    progress(0);
    try {
      for (const [i, request] of requests.entries()) {
        const result = await request();
        if (ticket !== counter) return;
        draw(result, i);
        errorBox.textContent = "";
        progress(i + 1);
      }
      setState(unit, "ready");
    } catch (err) {
      if (ticket !== counter) return;
      errorBox.textContent = err.message;
      if (line) line.textContent = "";
      setState(unit, "error");
      if (!(err instanceof ApiError)) console.error(err);
    }
  };
}

// The model a page starts on: the one the URL names (`wanted`) if the page can show it, else the first it shows
// best (a model with attention on the Attention page, which explains any classifier by its maps; one whose forward
// pass can be traced on the Forward page; one with a position table for learned positions), else the first.
export function startingModel(models, page, wanted = null) {
  const best = { attention: (m) => m.attention, forward: (m) => !m.forward_pass,
    positions: (m) => m.absolute_positions }[page] || (() => true);
  const shows = page === "forward" || page === "positions" ? best : () => true;
  const index = Number(wanted);
  if (wanted !== null && Number.isInteger(index) && models[index] && shows(models[index])) return models[index];
  return models.find(best) || models.find(shows) || null;
}

// A page with no model to show: everything but its title, lead and `note` hidden, and in the note one button that
// trains the small digits ViT here (a watched run, as on the Runs page) and opens the explorer on it when it ends.
// Without a way to train (no runs folder), the note says how to start the explorer with a model instead.
export function offerTraining(page, note, info) {
  for (const child of page.children) {
    if (child !== note && !child.matches("h2, .lead")) child.hidden = true;
  }
  note.hidden = false;
  const limits = info.training;
  if (!limits?.root) return;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "train-offer";
  button.textContent = `Train a small ViT on the ${limits.dataset} here (${limits.default_epochs} epochs, about half a minute)`;
  const status = document.createElement("span");
  status.className = "note";
  status.setAttribute("role", "status");
  note.append(" ", button, " ", status);
  button.addEventListener("click", async () => {
    button.disabled = true;
    const stamp = new Date().toISOString().slice(11, 19).replaceAll(":", "");
    try {
      await postJSON("/api/train", { name: `first-vit-${stamp}`, model: Object.keys(limits.models)[0],
        epochs: limits.default_epochs, rows: null });
    } catch (err) {
      if (!String(err.message).includes("is training")) { status.textContent = err.message; button.disabled = false; return; }
    }
    for (;;) {
      const { job } = await getJSON("/api/train");
      const epochs = job.records.length;
      status.textContent = `training ${job.name}: epoch ${epochs} of ${job.epochs}…`;
      if (job.status !== "running") {
        if (job.model_index === null || job.model_index === undefined) {
          status.textContent = `${job.name}: ${job.message || job.status}`;
          button.disabled = false;
          return;
        }
        window.location.reload();
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  });
}
