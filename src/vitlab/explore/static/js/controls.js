// Controls shared by the pages: a slider on a log scale that keeps the exact value a link gave it.
//
// A range input snaps to its step, so a temperature of 0.3 set by a link would read back as
// 10^-0.52 = 0.302. A log control remembers the value it was given until the user moves it.

// `input` (a range over log10 of the value) with its <output id="{input.id}-value">; `digits` decimals shown;
// `words` names the value for assistive technology ("temperature 0.3").
export function logControl(input, { digits = 3, words = "" } = {}) {
  let exact = null;
  const output = document.getElementById(`${input.id}-value`);
  const control = {
    get value() {
      return exact ?? Number((10 ** Number(input.value)).toFixed(digits));
    },
    set(value) {
      exact = value;
      input.value = Math.log10(value);
      control.show();
    },
    show() {
      const value = control.value;
      if (output) output.textContent = value;
      input.setAttribute("aria-valuetext", `${words} ${value}`.trim());
      return value;
    },
  };
  input.addEventListener("input", () => { exact = null; control.show(); });
  control.show();
  return control;
}
