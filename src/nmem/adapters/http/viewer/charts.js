// Charts as inline SVG built with DOM calls (no library, nothing fetched).
import { h, s } from "./dom.js";

const W = 640;

// Stacked columns per day: rows [{day, observations, prompts}].
export function activityChart(rows) {
  const H = 200, left = 36, bottom = 24, top = 8;
  const max = Math.max(1, ...rows.map((r) => r.observations + r.prompts));
  const step = (W - left - 8) / Math.max(1, rows.length);
  const scale = (v) => (v / max) * (H - bottom - top);
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "observations, prompts and replies per day" });
  const ticks = max >= 4 ? [0, Math.round(max / 2), max] : [0, max];
  for (const tick of ticks) {
    const y = H - bottom - scale(tick);
    svg.append(s("line", { class: "axis", x1: left, x2: W, y1: y, y2: y }),
      s("text", { x: left - 6, y: y + 4, "text-anchor": "end" }, String(tick)));
  }
  rows.forEach((r, i) => {
    const x = left + i * step + step * 0.15, w = Math.max(1, step * 0.7);
    const ho = scale(r.observations), hp = scale(r.prompts);
    const title = `${r.day}: ${r.observations} observations, ${r.prompts} prompts and replies`;
    svg.append(s("rect", { class: "bar1", x, width: w, y: H - bottom - ho, height: ho }, s("title", {}, title)),
      s("rect", { class: "bar2", x, width: w, y: H - bottom - ho - hp, height: hp }, s("title", {}, title)));
    if (i % Math.ceil(rows.length / 8) === 0) {
      svg.append(s("text", { x: x + w / 2, y: H - 6, "text-anchor": "middle" }, r.day.slice(5)));
    }
  });
  return h("figure", { class: "figure" }, svg,
    h("div", { class: "legend" }, h("span", {}, h("i", { class: "k1" }), "observations"),
      h("span", {}, h("i", { class: "k2" }), "prompts and replies")));
}

// Horizontal bars: counts {name: n}, the largest first.
export function barChart(counts, label) {
  const entries = Object.entries(counts || {}).sort((a, b) => b[1] - a[1]).slice(0, 12);
  const BW = 420, rowH = 22, left = 130, H = Math.max(rowH, entries.length * rowH) + 6;
  const max = Math.max(1, ...entries.map((e) => e[1]));
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${BW} ${H}`, role: "img", "aria-label": label });
  entries.forEach(([name, n], i) => {
    const y = 3 + i * rowH, w = ((BW - left - 50) * n) / max;
    svg.append(s("text", { x: left - 8, y: y + 15, "text-anchor": "end" }, name.length > 20 ? name.slice(0, 19) + "…" : name),
      s("rect", { class: "bar1", x: left, y: y + 3, width: Math.max(1, w), height: rowH - 8, rx: 3 }, s("title", {}, `${name}: ${n}`)),
      s("text", { x: left + w + 6, y: y + 15 }, String(n)));
  });
  if (!entries.length) svg.append(s("text", { x: 10, y: 16 }, "nothing yet"));
  return svg;
}
