// Numbers as the pages print them: one format per quantity, so the same kind of number never appears
// two ways on a page. Formatting only: every value comes from the server.

const DASH = "–";
const grouped = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });
const significant = new Intl.NumberFormat("en", { minimumSignificantDigits: 3, maximumSignificantDigits: 3 });
const missing = (v) => v === null || v === undefined || (typeof v === "number" && Number.isNaN(v));

// Counts (tokens, entries, parameters, images): 3,841,600.
export function count(n) {
  return missing(n) ? DASH : grouped.format(n);
}

// Ratios: three significant digits below 100, whole and grouped above: 0.00391×, 2.25×, 15,006×.
export function ratio(r) {
  if (missing(r)) return DASH;
  return `${Math.abs(r) >= 100 ? grouped.format(r) : significant.format(r)}×`;
}

// Probabilities, attention weights, accuracies: four decimals (0.0625); tiny ones in powers of ten.
export function prob(p) {
  if (missing(p)) return DASH;
  return p !== 0 && Math.abs(p) < 1e-4 ? p.toExponential(1) : p.toFixed(4);
}

// Signed measurements (occlusion, normalised pixels, similarities): three decimals and a sign.
export function signed(v) {
  if (missing(v)) return DASH;
  const text = Math.abs(v) !== 0 && Math.abs(v) < 1e-3 ? Math.abs(v).toExponential(1) : Math.abs(v).toFixed(3);
  return `${v < 0 ? "−" : v > 0 ? "+" : ""}${text}`;
}

// Any other measurement (losses, statistics, slider settings): three significant digits, grouped.
export function measure(v) {
  if (missing(v)) return DASH;
  if (typeof v !== "number") return String(v);
  const size = Math.abs(v);
  if (size !== 0 && (size >= 1e7 || size < 1e-3)) return v.toExponential(2);
  return size >= 1000 ? grouped.format(v) : significant.format(v);
}

// Bytes in binary units: 48 B, 3.00 MiB.
export function bytes(n) {
  if (missing(n)) return DASH;
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let k = 0;
  while (Math.abs(n) >= 1024 && k < units.length - 1) { n /= 1024; k++; }
  return k === 0 ? `${grouped.format(n)} B` : `${n.toFixed(2)} ${units[k]}`;
}

// Floating-point operations in SI units: 171 MFLOP, 1.32 TFLOP.
export function flops(n) {
  if (missing(n)) return DASH;
  const units = ["", "k", "M", "G", "T", "P", "E"];
  let k = 0;
  while (Math.abs(n) >= 1000 && k < units.length - 1) { n /= 1000; k++; }
  return `${significant.format(n)} ${units[k]}FLOP`;
}

// Durations: 0.39 s, 12.3 s, 1,234 s.
export function seconds(s) {
  return missing(s) ? DASH : `${measure(s)} s`;
}

// A run table's cell by its column: accuracies as probabilities, counts grouped, times in seconds.
export function column(key, value) {
  if (missing(value)) return DASH;
  if (typeof value !== "number") return String(value);
  if (/acc|ece|gap|agreement/.test(key)) return prob(value);
  if (/seconds/.test(key)) return seconds(value);
  if (/^lr$|learning_rate/.test(key)) return value.toExponential(2);
  if (/rows|params|epoch|images|seed|patch|count|tokens/.test(key) && Number.isInteger(value)) return count(value);
  return measure(value);
}

// A value of a cost metric: entries counted, memory in bytes, FLOPs in SI units.
export function costValue(metric, value) {
  return metric === "memory" ? bytes(value) : metric === "flops" ? flops(value) : count(value);
}
