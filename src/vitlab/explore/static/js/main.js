// The explorer's entry point: the tabs (one page per URL hash, its title per page), the skip link, and each
// page's set-up. The image picker follows the page: until the user chooses an image, each page starts on the
// samples it reads best.
import { $, getJSON, startingModel } from "./api.js";
import { initAttention } from "./attention.js";
import { initCost } from "./cost.js";
import { initForward } from "./forward.js";
import { initLimits } from "./limits.js";
import { initMechanics } from "./mechanics.js";
import { follow, initPicker } from "./picker.js";
import { initRuns } from "./runs.js";
import { initSegment } from "./segment.js";
import { PAGES, currentPage, linkTabs, setting } from "./state.js";
import { initTokens } from "./tokens.js";

const WITH_PICKER = new Set(["tokens", "attention", "forward"]);
const SETUP = { tokens: initTokens, attention: initAttention, forward: initForward, limits: initLimits,
  mechanics: initMechanics, segment: initSegment, cost: initCost, runs: initRuns };
const TEXTBOOK_SOURCE = "fashion-mnist";   // the texts' 28x28 images: 16 tokens of 49 pixels at P = 7
const started = new Set();
let info = null;

// The samples page `name` reads best: the texts' images on Tokens, the model's own dataset where a model reads.
function preferredSource(name) {
  if (name === "tokens") return TEXTBOOK_SOURCE;
  if (name === "attention") return startingModel(info.models, "attention", setting("model"))?.samples;
  if (name === "forward") return startingModel(info.models, "forward", setting("fmodel"))?.samples;
  return null;
}

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
  if (!info) return;
  if (WITH_PICKER.has(name)) follow(preferredSource(name));
  if (!started.has(name)) {
    started.add(name);
    SETUP[name](info);
  }
}

// The skip link moves the focus to the page's heading, past the tabs and the image picker.
function skip(event) {
  event.preventDefault();
  $(`${currentPage()}-title`).focus();
}

async function start() {
  window.addEventListener("hashchange", show);
  $("skip").addEventListener("click", skip);
  show();
  info = await getJSON("/api/info");
  $("version").textContent = `vitlab ${info.version}`;
  initPicker(info, WITH_PICKER.has(currentPage()) ? preferredSource(currentPage()) : null);
  show();
  document.body.dataset.ready = "true";
}

start();
