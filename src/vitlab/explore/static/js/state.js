// The page and its settings in the URL, so a view can be shared or reloaded:
//   #attention?ref=digits:3&model=0&query=5&head=3.1&t=0.5
// The part before "?" names the page; the settings after it are shared by all pages (the image is the
// same on Tokens and Attention). Settings are written with history.replaceState (no new history entry
// per slider step) and the tabs' links carry them along.

export const PAGES = ["tokens", "attention", "forward", "limits", "mechanics", "segment", "cost", "runs"];

function split() {
  const [page, query = ""] = location.hash.slice(1).split("?");
  return { page: PAGES.includes(page) ? page : "tokens", params: new URLSearchParams(query) };
}

export function currentPage() {
  return split().page;
}

// The setting `name` from the URL, or `fallback`.
export function setting(name, fallback = null) {
  const value = split().params.get(name);
  return value === null ? fallback : value;
}

// Write settings (null or undefined removes one) into the URL without a history entry.
export function remember(values) {
  const { page, params } = split();
  for (const [key, value] of Object.entries(values)) {
    if (value === null || value === undefined || value === "") params.delete(key); else params.set(key, value);
  }
  const query = params.toString();
  history.replaceState(null, "", `#${page}${query ? `?${query}` : ""}`);
  linkTabs(query);
}

export function linkTabs(query = split().params.toString()) {
  for (const tab of document.querySelectorAll("#tabs a[data-page]")) {
    tab.setAttribute("href", `#${tab.dataset.page}${query ? `?${query}` : ""}`);
  }
}
