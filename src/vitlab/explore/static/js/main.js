// The explorer's entry point: the tabs (one page per URL hash) and each page's set-up.
import { $, getJSON } from "./api.js";
import { initAttention } from "./attention.js";
import { initCost } from "./cost.js";
import { initMechanics } from "./mechanics.js";
import { initPicker } from "./picker.js";
import { initRuns } from "./runs.js";
import { initTokens } from "./tokens.js";

const PAGES = ["tokens", "attention", "mechanics", "cost", "runs"];
const WITH_PICKER = new Set(["tokens", "attention"]);
const SETUP = { tokens: initTokens, attention: initAttention, mechanics: initMechanics, cost: initCost, runs: initRuns };
const started = new Set();
let info = null;

// Show the page named by the URL hash; a page sets itself up (and asks the server) on its first showing.
function show() {
  const name = PAGES.includes(location.hash.slice(1)) ? location.hash.slice(1) : "tokens";
  for (const page of PAGES) {
    $(`page-${page}`).classList.toggle("active", page === name);
    document.querySelector(`#tabs a[data-page=${page}]`).classList.toggle("active", page === name);
  }
  $("picker").hidden = !WITH_PICKER.has(name);
  document.body.dataset.page = name;
  if (info && !started.has(name)) {
    started.add(name);
    SETUP[name](info);
  }
}

async function start() {
  window.addEventListener("hashchange", show);
  show();
  info = await getJSON("/api/info");
  $("version").textContent = `vitlab ${info.version}`;
  initPicker(info);
  show();
  document.body.dataset.ready = "true";
}

start();
