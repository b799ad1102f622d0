// Limits page: what attention maps cannot tell. The model's most confident mistakes on its own test images,
// a right and a wrong answer's maps on one colour scale, the maps of a model whose weights are noise beside the
// trained model's (with their rank correlation), and each map's deletion curve against random orders.
import { $, announce, decode, getJSON, inPieces, latest, modelLabels, offerTraining, setState, startingModel }
  from "./api.js";
import { arrowKeys, cursor, gridHit } from "./cursor.js";
import { colourBar, describe, lineChart, makeCanvas, paintHeat, paintImage, surface } from "./draw.js";
import { measure, prob, signed } from "./format.js";
import { press, thumbnails } from "./picker.js";
import { remember, setting } from "./state.js";
import { numbersTable } from "./table.js";

const runVerdicts = latest($("verdicts-panel"), $("verdicts-error"));
// The panels of maps and curves come in pieces (one map or one curve a request): a 224-px model on a CPU takes
// seconds per map, so each panel fills in as its pieces arrive, cheapest first, with a line saying how far it is.
const runPair = inPieces($("pair-panel"), $("pair-error"), $("pair-progress"));
const runRandom = inPieces($("random-panel"), $("random-error"), $("random-progress"));
const runDeletion = inPieces($("deletion-panel"), $("deletion-error"), $("deletion-progress"));
const METHODS = { attention: "last layer's attention", rollout: "rollout", gradient: "gradient",
  occlusion: "occlusion" };
const COLOURS = { attention: "#1f77b4", rollout: "#ff7f0e", gradient: "#2ca02c", occlusion: "#d62728",
  random: "#7f7f7f" };
const state = { models: [], model: null, query: "mean", verdicts: null, chosen: { right: null, wrong: null },
  focus: "wrong", images: {} };

const mark = (entry) => (entry.predicted === entry.label ? "✓" : "✗");
const caption = (entry) => `${entry.predicted} (${prob(entry.confidence)}) ${mark(entry)} true ${entry.label}`;

function methodsOf(model) {
  return Object.keys(METHODS).filter((m) => model.attention || !["attention", "rollout"].includes(m));
}

async function imageOf(ref) {
  if (!state.images[ref]) state.images[ref] = decode((await getJSON("/api/image", { ref })).image);
  return state.images[ref];
}

function drawVerdicts(v) {
  state.verdicts = v;
  $("verdicts-facts").textContent = `${state.models[state.model].model} on the ${v.images} ${v.source} test images ` +
    `it never trained on: accuracy ${prob(v.accuracy)}, ${v.wrong_count} wrong. The wrong ones below are as ` +
    "confident as the right ones: confidence does not say which is which.";
  // A model right (or wrong) on every image has no pair to show, and the other panels show the kind it has.
  const empty = { wrong: !v.mistakes.length, right: !v.right.length };
  for (const button of $("lim-focus").querySelectorAll("button")) button.disabled = empty[button.dataset.focus];
  const other = state.focus === "wrong" ? "right" : "wrong";
  if (empty[state.focus] && !empty[other]) setFocus(other, false);
  const lone = empty.wrong || empty.right;
  $("pair-panel").querySelector(".result").hidden = lone;
  $("pair-missing").hidden = !lone;
  if (lone) {
    $("pair-missing").textContent = empty.wrong
      ? `No mistake among the ${v.images} test images: there is no wrong answer to set beside a right one.`
      : `No right answer among the ${v.images} test images: there is none to set beside a mistake.`;
    setState($("pair-panel"), "ready");
  }
  for (const [kind, list, box] of [["wrong", v.mistakes, $("lim-mistakes")], ["right", v.right, $("lim-right")]]) {
    box.replaceChildren();
    if (!list.length) box.textContent = kind === "wrong" ? "none: the model is right on every image" : "none";
    Promise.all(list.map((entry) => imageOf(entry.ref))).then((images) => {
      if (!images.length) return;
      const [c, h, w] = images[0].shape;
      const data = new Float32Array(images.length * c * h * w);
      images.forEach((im, i) => data.set(im.data, i * c * h * w));
      const buttons = thumbnails(box, { shape: [images.length, c, h, w], data },
        list.map((entry) => `${entry.ref}: predicted ${caption(entry)}`), (k) => pick(kind, list[k]));
      buttons.forEach((button, k) => {
        const text = document.createElement("span");
        text.textContent = `${list[k].predicted} ${mark(list[k])}`;
        text.setAttribute("aria-hidden", "true");
        button.append(text);
        button.dataset.ref = list[k].ref;
      });
      const wanted = state.chosen[kind]?.ref;
      const index = Math.max(0, list.findIndex((entry) => entry.ref === wanted));
      press(buttons[index], box);
      pick(kind, list[index]);
    });
  }
}

function pick(kind, entry) {
  state.chosen[kind] = entry;
  remember({ [kind === "wrong" ? "lwrong" : "lright"]: entry.ref });
  if (state.chosen.right?.predicted && state.chosen.wrong?.predicted) refreshPair();
  if (kind === state.focus) refreshFocus();
}

// The right and the wrong answer's maps by `method` (`answers` in that order, the one not yet come undefined),
// on one colour scale spanning both.
async function drawPair(answers, method) {
  const shown = [["right", answers[0]], ["wrong", answers[1]]].filter(([, answer]) => answer);
  const images = await Promise.all(shown.map(([kind]) => imageOf(state.chosen[kind].ref)));
  const box = $("pair-row");
  box.replaceChildren();
  const ranges = shown.map(([, a]) => a.maps[method].range);
  const signedMap = method === "occlusion";
  const top = Math.max(...ranges.map((r) => (signedMap ? Math.max(Math.abs(r[0]), Math.abs(r[1])) : r[1])), 1e-12);
  const scale = signedMap ? { lo: -top, hi: top, map: "diverging" } : { lo: 0, hi: top, map: "viridis" };
  shown.forEach(([kind, answer], k) => {
    const entry = state.chosen[kind];
    const image = images[k];
    const [gh, gw] = answer.grid;
    const figure = document.createElement("figure");
    figure.className = "heatmap";
    figure.dataset.kind = kind;
    const title = document.createElement("figcaption");
    title.textContent = `${kind === "right" ? "right" : "wrong"}: ${caption(entry)}`;
    const pictured = makeCanvas(120, 120, `${entry.ref}, the image`);
    paintImage(surface(pictured), image);
    const canvas = makeCanvas(120, 120);
    canvas.dataset.colourbar = "pair-scale";
    const values = decode(answer.maps[method].values).data;
    const s = surface(canvas);
    paintHeat(s, values, gh, gw, scale, { box: { x: 0, y: 0, w: s.w, h: s.h } });
    const format = signedMap ? signed : measure;
    cursor(canvas, { label: `${METHODS[method]} of the ${kind} answer`, describe: (p) => `patch ${p}: ${format(values[p])}`,
      onMove: () => {} }).layout(gh * gw, gw, gridHit({ x: 0, y: 0, w: s.w, h: s.h }, gh, gw));
    const row = document.createElement("div");
    row.className = "row";
    row.append(pictured, canvas);
    figure.append(title, row);
    box.append(figure);
  });
  colourBar($("pair-scale"), scale, `${METHODS[method]}, one scale for both`, signedMap ? signed : measure);
}

function refreshPair() {
  const method = $("lim-method").value;
  const answers = [];
  runPair([state.chosen.right, state.chosen.wrong].map((entry) => () => getJSON("/api/limits/maps",
    { model: state.model, ref: entry.ref, query: state.query, method })), (answer, i) => {
    answers[i] = answer;
    drawPair(answers, method);
  }, "maps");
}

// The trained and the randomised model's `methods` maps, as far as `answer` has them (the others wait in their
// place, said so).
function drawRandom(answer, methods) {
  const grid = $("random-grid");
  grid.replaceChildren();
  grid.style.gridTemplateColumns = `max-content repeat(${methods.length}, minmax(0, 9rem))`;
  grid.append(document.createElement("span"));
  for (const method of methods) {
    const head = document.createElement("span");
    head.className = "label";
    const rho = answer.spearman[method];
    head.textContent = `${METHODS[method]}: ρ ${rho === undefined ? "…" : rho === null ? "–" : signed(rho)}`;
    grid.append(head);
  }
  const [gh, gw] = state.models[state.model].map_grid;
  for (const [which, label] of [["trained", "trained"], ["randomised", "random weights"]]) {
    const name = document.createElement("span");
    name.className = "label";
    name.textContent = label;
    grid.append(name);
    for (const method of methods) {
      const map = answer[which][method];
      if (!map) {
        const pending = document.createElement("span");
        pending.className = "note pending";
        pending.textContent = "computing…";
        grid.append(pending);
        continue;
      }
      const signedMap = method === "occlusion";
      const top = Math.max(Math.abs(map.range[0]), Math.abs(map.range[1]), 1e-12);
      const scale = signedMap ? { lo: -top, hi: top, map: "diverging" } : { lo: 0, hi: map.range[1] || 1, map: "viridis" };
      const canvas = makeCanvas(120, 120, `${METHODS[method]} of the ${label} model, from ${signed(map.range[0])} ` +
        `to ${signed(map.range[1])} (each map on its own range)`);
      canvas.classList.add("fluid");
      const s = surface(canvas);
      paintHeat(s, decode(map.values).data, gh, gw, scale, { box: { x: 0, y: 0, w: s.w, h: s.h } });
      grid.append(canvas);
    }
  }
  const random = answer.randomised_prediction;
  $("random-note").textContent = "Each map on its own range." + (random ? ` The randomised model predicts ` +
    `${random.class} (${prob(random.confidence)}); its maps are for the trained model's class ${answer.target}.` : "");
}

function drawDeletion(answer) {
  const series = Object.entries(answer.curves).map(([method, y]) => ({
    label: `${method === "random" ? `random orders (mean of ${answer.random_orders})` : METHODS[method]}: ` +
      `area ${prob(answer.area[method])}`,
    x: answer.removed, y, colour: COLOURS[method], dash: method === "random" ? [6, 4] : undefined }));
  lineChart($("deletion-chart"), $("deletion-legend"), series,
    { xLabel: "patches removed (most important first)", yLabel: `probability of ${answer.target}`, points: true });
  $("deletion-caption").textContent = `probability of the predicted class ${answer.target} as patches are removed`;
  numbersTable($("deletion-table"), "area under each deletion curve (lower: the map found the evidence sooner)",
    ["map", "area", "probability with every patch removed"],
    Object.keys(answer.curves).sort((a, b) => answer.area[a] - answer.area[b])
      .map((m) => [m === "random" ? "random orders" : METHODS[m], prob(answer.area[m]), prob(answer.curves[m].at(-1))]));
}

function refreshFocus() {
  const entry = state.chosen[state.focus];
  if (!entry?.predicted) return;
  const params = { model: state.model, ref: entry.ref, query: state.query };
  const methods = methodsOf(state.models[state.model]);
  // Each trained map, then the same map of the randomised model (the trained one kept for it and for the curves).
  const compared = { trained: {}, randomised: {}, spearman: {} };
  drawRandom(compared, methods);
  runRandom(methods.flatMap((method) => [() => getJSON("/api/limits/maps", { ...params, method }),
    () => getJSON("/api/limits/randomised", { ...params, method })]), (answer) => {
    if (answer.maps) Object.assign(compared.trained, answer.maps);
    else {
      for (const part of ["trained", "randomised", "spearman"]) Object.assign(compared[part], answer[part]);
      Object.assign(compared, { target: answer.target, randomised_prediction: answer.randomised_prediction });
    }
    drawRandom(compared, methods);
  }, "maps");
  const deletion = { curves: {}, area: {} };
  runDeletion([...methods, "random"].map((method) => () => getJSON("/api/limits/deletion", { ...params, method })),
    (answer) => {
      Object.assign(deletion, answer, { curves: { ...deletion.curves, ...answer.curves },
        area: { ...deletion.area, ...answer.area } });
      drawDeletion(deletion);
    }, "curves");
  announce(`${state.focus === "wrong" ? "the mistake" : "the right answer"} ${entry.ref}: ${caption(entry)}`);
}

function setQuery(query) {
  state.query = query;
  $("lim-cls").setAttribute("aria-pressed", String(query === "cls"));
  $("lim-mean").setAttribute("aria-pressed", String(query === "mean"));
  remember({ lq2: query === "mean" ? null : query });
  if (state.chosen.right?.predicted && state.chosen.wrong?.predicted) refreshPair();
  refreshFocus();
}

// Focus on the mistake or the right answer; `chosen` is false where the page chose it (no image of the other
// kind), which the URL does not keep.
function setFocus(focus, chosen = true) {
  state.focus = focus;
  for (const button of $("lim-focus").querySelectorAll("button")) {
    button.setAttribute("aria-pressed", String(button.dataset.focus === focus));
  }
  if (chosen) remember({ lfocus: focus === "wrong" ? null : focus });
  refreshFocus();
}

function chooseModel(index, fromLink = false) {
  if (!fromLink) state.chosen = { right: null, wrong: null };
  state.model = index;
  const model = state.models[index];
  remember({ lmodel: index });
  $("lim-model").value = index;
  $("lim-method").replaceChildren(...methodsOf(model).map((m) => new Option(METHODS[m], m)));
  const wanted = setting("lmethod");
  if (methodsOf(model).includes(wanted)) $("lim-method").value = wanted;
  $("lim-cls").disabled = !model.class_token;
  if (!model.class_token && state.query === "cls") state.query = "mean";
  runVerdicts(() => getJSON("/api/limits/verdicts", { model: index, source: model.samples }), drawVerdicts);
}

export function initLimits(info) {
  state.models = info.models;
  const labels = modelLabels(info.models);
  const available = new Set(info.samples.filter((s) => s.available).map((s) => s.name));
  info.models.forEach((model, i) => {
    const option = new Option(available.has(model.samples) ? labels[i] : `${labels[i]} (its data is not found)`, i);
    option.disabled = !available.has(model.samples);
    $("lim-model").append(option);
  });
  const usable = info.models.filter((m) => available.has(m.samples));
  if (!usable.length) {
    $("limits-none").textContent = info.models.length
      ? "The models' own datasets are not found here: start `vitlab explore --data-dir DIR` with them, or train " +
        "a model on a dataset the explorer has."
      : "No checkpoint loaded: start `vitlab explore --checkpoint RUN_OR_FILE`, or train one here.";
    offerTraining($("page-limits"), $("limits-none"), info);
    return;
  }
  for (const [kind, name] of [["wrong", "lwrong"], ["right", "lright"]]) {
    const ref = setting(name);
    if (ref) state.chosen[kind] = { ref };
  }
  if (setting("lq2") === "cls") state.query = "cls";
  $("lim-model").addEventListener("change", () => chooseModel(Number($("lim-model").value)));
  $("lim-method").addEventListener("change", () => { remember({ lmethod: $("lim-method").value }); refreshPair(); });
  $("lim-cls").addEventListener("click", () => setQuery("cls"));
  $("lim-mean").addEventListener("click", () => setQuery("mean"));
  for (const button of $("lim-focus").querySelectorAll("button")) {
    button.addEventListener("click", () => setFocus(button.dataset.focus));
  }
  if (setting("lfocus") === "right") setFocus("right");
  arrowKeys($("lim-mistakes"), "button", () => 1);
  arrowKeys($("lim-right"), "button", () => 1);
  setQuery(state.query);
  const wanted = Number(setting("lmodel"));
  const first = usable.includes(info.models[wanted]) ? info.models[wanted] : startingModel(usable, "attention");
  chooseModel(first.index, true);
}
