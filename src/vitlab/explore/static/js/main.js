// The explorer's entry point: the tabs (one page per URL hash, its title per page) and each page's set-up.
import { $, getJSON } from "./api.js";
import { initAttention } from "./attention.js";
import { initCost } from "./cost.js";
import { initMechanics } from "./mechanics.js";
import { initPicker } from "./picker.js";
import { initRuns } from "./runs.js";
import { initSegment } from "./segment.js";
import { PAGES, currentPage, linkTabs } from "./state.js";
import { initTokens } from "./tokens.js";

const WITH_PICKER = new Set(["tokens", "attention"]);
const SETUP = { tokens: initTokens, attention: initAttention, mechanics: initMechanics, segment: initSegment,
  cost: initCost, runs: initRuns };
const started = new Set();
let info = null;

// Show the page named by the URL hash; a page sets itself up (and asks the server) on its first showing.
function show() {
  const name = currentPage();
  for (const page of PAGES) {
    $(`page-${page}`).classList.toggle("active", page === name);
    const tab = document.querySelector(`#tabs a[data-page=${page}]`);
    tab.classList.toggle("active", page === name);
    if (page === name) tab.setAttribute("aria-current", "page"); else tab.removeAttribute("aria-current");
  }
  $("picker").hidden = !WITH_PICKER.has(name);
  document.body.dataset.page = name;
  document.title = `${document.querySelector(`#tabs a[data-page=${name}]`).textContent} — vitlab explore`;
  linkTabs();
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
