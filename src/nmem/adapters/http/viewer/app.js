// The viewer's shell: hash routes, the theme, the live indicator and feed.
import { listen } from "./api.js";
import { clear, h, toast } from "./dom.js";
import { pages } from "./views.js";

const main = document.getElementById("main");
let current = null;
let generation = 0;

function route(event) {
  const navigated = !!event;
  const hash = location.hash || "#/sessions";
  const [pathPart, queryPart] = hash.slice(2).split("?");
  const parts = pathPart.split("/").map(decodeURIComponent);
  const page = pages[parts[0]] ? parts[0] : "sessions";
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.page === page);
  }
  const params = new URLSearchParams(queryPart || "");
  current = pages[page];
  // Each visit renders into its own element, shown only if no later visit began meanwhile, so a
  // slow answer for a page already left never overwrites the page now shown.
  const mine = ++generation;
  const target = h("div", { class: "page" });
  const loading = setTimeout(() => { if (mine === generation) clear(main, h("p", { class: "muted" }, "Loading…")); }, 150);
  current.render(target, parts.slice(1), params).then(() => {
    if (mine === generation) {
      clear(main, target);
      if (navigated) scrollTo(0, 0);  // a new page starts at its top
    }
  }, (err) => {
    if (mine === generation) clear(main, h("h1", {}, "Something went wrong"), h("p", { class: "text" }, err.message));
  }).finally(() => clearTimeout(loading));
}

function theme(name) {
  document.documentElement.dataset.theme = name;
  document.getElementById("theme").textContent = name === "dark" ? "Light" : "Dark";
  try { localStorage.setItem("nmem-theme", name); } catch (_) { /* private mode */ }
}

function feedEntry(change) {
  const r = change.record || {};
  const text = r.content_preview || r.summary || r.id || "";
  const item = h("li", { class: "new" }, h("b", {}, `${change.kind} ${change.action}`), " ",
    h("a", { href: link(change) }, String(text).slice(0, 140)));
  const list = document.getElementById("feed");
  list.prepend(item);
  while (list.children.length > 30) list.lastChild.remove();
}

function link(change) {
  const r = change.record || {};
  if (change.kind === "session") return `#/sessions/${r.id}`;
  if (change.kind === "memory") return "#/memories";
  if (change.kind === "observation") return `#/record/${r.id}`;
  return `#/record/${r.ref || ""}`;
}

let saved = null;
try { saved = localStorage.getItem("nmem-theme"); } catch (_) { /* private mode */ }
theme(saved || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"));
document.getElementById("theme").addEventListener("click", () => {
  theme(document.documentElement.dataset.theme === "dark" ? "light" : "dark");
});
addEventListener("hashchange", route);
route();

const indicator = document.getElementById("live");
listen((change) => {
  feedEntry(change);
  if (current && current.onChange) {
    try { current.onChange(change); } catch (err) { toast(err.message, true); }
  }
}, (on) => {
  indicator.className = on ? "live on" : "live off";
  indicator.textContent = on ? "live" : "offline";
});
