// Training you can watch (Runs page): start a small run, follow its loss and accuracy as the server streams them
// (server-sent events), cancel it, and move an epoch slider to see the model's attention and learned positions at
// that epoch, from the noise they start as. The run is written by vitlab's engine as an ordinary run folder.
import { $, announce, decode, getJSON, latest, postJSON } from "./api.js";
import { colourBar, describe, facts, lineChart, paintTiles, surface } from "./draw.js";
import { measure, prob } from "./format.js";
import { drawPositionGrid } from "./layers.js";

const runSnapshot = latest($("train-snapshot"), $("train-snapshot-error"));
const state = { info: null, job: null, records: [], steps: [], stream: null, following: true, probe: null,
  onDone: null };

function status(text) {
  $("train-status").textContent = text;
}

function busy(running) {
  $("train-start").disabled = running;
  $("train-cancel").disabled = !running;
  for (const id of ["train-name", "train-model", "train-epochs", "train-rows"]) $(id).disabled = running;
}

function drawChart() {
  const epochs = state.records.filter((r) => r.epoch > 0);
  const x = epochs.map((r) => r.epoch);
  const series = [
    { label: "train loss (running, each step)", x: state.steps.map((s) => s.at), y: state.steps.map((s) => s.loss),
      colour: "#9aa5b8" },
    { label: "train loss", x, y: epochs.map((r) => r.train_loss ?? null), colour: "#1f77b4" },
    { label: "val loss", x, y: epochs.map((r) => r.val_loss ?? null), colour: "#ff7f0e" },
    { label: "train accuracy", x, y: epochs.map((r) => r.train_acc ?? null), colour: "#2ca02c", dash: [6, 3] },
    { label: "val accuracy", x, y: epochs.map((r) => r.val_acc ?? null), colour: "#d62728", dash: [6, 3] },
  ].filter((s) => s.y.some((v) => v !== null));
  if (series.length) lineChart($("train-chart"), $("train-legend"), series, { xLabel: "epoch", yLabel: "loss, accuracy" });
}

function slider(max) {
  const input = $("train-epoch");
  const follow = Number(input.value) === Number(input.max);
  input.max = max;
  if (follow && state.following) input.value = max;
  input.disabled = max === 0 && !state.job;
  return follow;
}

function drawSnapshot(snap) {
  const heat = decode(snap.heat);
  const [layers, heads, gh, gw] = heat.shape;
  const scale = { lo: 0, hi: snap.shared_max || snap.heat_max || 1, map: "viridis" };   // one scale for every epoch
  const canvas = $("train-heads");
  const s = surface(canvas);
  paintTiles(s, heat.data, layers, heads, gh, gw, scale, { left: 46, top: 14, gap: 5 });
  const { ctx } = s;
  ctx.fillStyle = "#3d4656";
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "right";
  const size = Math.min((s.w - 46 - 5 * (heads - 1)) / heads, (s.h - 14 - 5 * (layers - 1)) / layers);
  for (let l = 0; l < layers; l++) ctx.fillText(`layer ${l}`, 40, 14 + l * (size + 5) + 14);
  ctx.textAlign = "center";
  for (let h = 0; h < heads; h++) ctx.fillText(`head ${h}`, 46 + (h + 0.5) * (size + 5), 10);
  colourBar($("train-heads-scale"), scale, "attention weight (one scale for every epoch: 0 to the largest so far)",
    prob);
  const entropy = decode(snap.stats.entropy).data;
  const meanEntropy = entropy.reduce((a, b) => a + b, 0) / entropy.length;
  describe(canvas, `attention from the mean of the patches after epoch ${snap.epoch}, ${layers} layers by ${heads} ` +
    `heads, largest weight ${prob(snap.heat_max)}, mean entropy ${measure(meanEntropy)} nats`);
  $("train-heads-caption").textContent = `attention from the mean of the patches, epoch ${snap.epoch}`;
  if (snap.similarity) {
    drawPositionGrid($("train-positions"), $("train-positions-scale"), decode(snap.similarity).data, [gh, gw]);
  }
  const record = state.records.find((r) => r.epoch === snap.epoch) || {};
  const probe = state.probe;
  const judged = probe ? `${snap.predicted === probe.label ? "✓" : "✗"} (true ${probe.label})` : "";
  facts($("train-facts"), [["epoch", snap.epoch === 0 ? "0: the seeded weights before any step" : snap.epoch],
    ["train loss", measure(record.train_loss)], ["val accuracy", prob(record.val_acc)],
    ["largest attention weight", prob(snap.heat_max)], ["mean entropy of the heads (nats)", measure(meanEntropy)],
    [`prediction on ${state.info.training.probe}`, `${snap.predicted} (${prob(Math.max(...snap.probabilities))}) ` +
      judged]]);
  $("train-epoch-value").textContent = snap.epoch;
  $("train-epoch").setAttribute("aria-valuetext", `epoch ${snap.epoch}`);
}

function showEpoch(epoch) {
  runSnapshot(() => getJSON("/api/train/snapshot", { epoch }), drawSnapshot);
}

function onEpoch(record) {
  if (!state.records.some((r) => r.epoch === record.epoch)) state.records.push(record);
  state.records.sort((a, b) => a.epoch - b.epoch);
  drawChart();
  const follow = slider(record.epoch);
  if (follow && state.following) showEpoch(record.epoch);
}

function onStep(step) {
  const steps = state.job?.steps || 1;
  state.steps.push({ at: step.epoch - 1 + step.step / steps, loss: step.loss });
  status(`training ${state.job.name}: epoch ${step.epoch} of ${state.job.epochs}, step ${step.step} of ${steps}, ` +
    `running loss ${measure(step.loss)}${step.acc === undefined ? "" : `, accuracy ${prob(step.acc)}`}, ` +
    `${Math.round(step.images_per_s)} images/s`);
  if (state.steps.length % 5 === 0) drawChart();
}

function onEnd(end) {
  state.stream?.close();
  state.stream = null;
  state.job = { ...state.job, status: end.status };
  busy(false);
  status(end.message);
  announce(end.message);
  $("train-panel").dataset.job = end.status;
  drawChart();
  const links = $("train-links");
  links.replaceChildren();
  if (end.model_index !== null && end.model_index !== undefined) {
    const a = document.createElement("a");
    a.href = `#attention?model=${end.model_index}`;
    a.textContent = `Open ${state.job.name} on the Attention page`;
    links.append(a);
  }
  if (state.onDone) state.onDone({ ...end, name: state.job.name });
}

// Follow the current job's events; the browser reconnects where it left off if the stream breaks.
function follow() {
  state.stream?.close();
  const stream = new EventSource("/api/train/events");
  state.stream = stream;
  stream.addEventListener("start", (e) => { state.job = { ...state.job, steps: JSON.parse(e.data).steps }; });
  stream.addEventListener("step", (e) => onStep(JSON.parse(e.data)));
  stream.addEventListener("epoch", (e) => onEpoch(JSON.parse(e.data).record));
  stream.addEventListener("note", (e) => status(JSON.parse(e.data).message));
  stream.addEventListener("end", (e) => onEnd(JSON.parse(e.data)));
}

function show(job) {
  state.job = job;
  state.records = [{ epoch: 0 }, ...job.records];
  state.steps = [];
  $("train-result").hidden = false;
  $("train-panel").dataset.job = job.status;
  $("train-epoch").max = Math.max(0, ...job.snapshots);
  $("train-epoch").value = $("train-epoch").max;
  $("train-epoch").disabled = false;
  drawChart();
  if (job.snapshots.length) showEpoch(Math.max(...job.snapshots));
}

async function start(event) {
  event.preventDefault();
  $("train-error").textContent = "";
  const rows = $("train-rows").value.trim();
  const body = { name: $("train-name").value.trim(), model: $("train-model").value,
    epochs: Number($("train-epochs").value), rows: rows === "" ? null : Number(rows) };
  try {
    const answer = await postJSON("/api/train", body);
    show(answer.job);
    busy(true);
    status(`training ${answer.job.name}: starting…`);
    announce(`training ${answer.job.name} started`);
    follow();
  } catch (err) {
    $("train-error").textContent = err.message;
  }
}

async function cancel() {
  try {
    await postJSON("/api/train/cancel");
    status(`cancelling ${state.job.name}: it stops at its next step…`);
  } catch (err) {
    $("train-error").textContent = err.message;
  }
}

// `onDone(end)` hears every run that ends (the Runs page lists it, the explorer has loaded its model).
export async function initTraining(info, onDone) {
  state.info = info;
  state.onDone = onDone;
  const limits = info.training;
  for (const [name, words] of Object.entries(limits.models)) {
    const option = new Option(name, name);
    option.title = words;
    $("train-model").append(option);
  }
  $("train-epochs").min = limits.epochs[0];
  $("train-epochs").max = limits.epochs[1];
  $("train-epochs").value = limits.default_epochs;
  $("train-rows").min = limits.rows[0];
  $("train-rows").max = limits.rows[1];
  const now = new Date();
  const stamp = [now.getHours(), now.getMinutes(), now.getSeconds()].map((v) => String(v).padStart(2, "0")).join("");
  $("train-name").value = `watched-${stamp}`;
  $("train-form").addEventListener("submit", start);
  $("train-cancel").addEventListener("click", cancel);
  $("train-epoch").addEventListener("input", () => {
    const epoch = Number($("train-epoch").value);
    state.following = epoch === Number($("train-epoch").max);
    showEpoch(epoch);
  });
  if (!limits.root) {
    busy(false);
    $("train-start").disabled = true;
    status("No runs folder to train into: start `vitlab explore --runs DIR`.");
    return;
  }
  getJSON("/api/image", { ref: limits.probe }).then((probe) => { state.probe = probe; }).catch(() => {});
  const current = await getJSON("/api/train");
  if (current.job) {
    show(current.job);
    status(current.job.message || `training ${current.job.name}…`);
    if (current.job.status === "running") { busy(true); follow(); }
  }
}
