// Building the page. Stored text is hostile input: every value enters the DOM as a text node or
// through setAttribute on a fixed attribute name; nothing is ever parsed as HTML.

export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAll(node, attrs);
  append(node, children);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  setAll(node, attrs);
  append(node, children);
  return node;
}

function setAll(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (name === "href") {
      node.setAttribute("href", safeHref(String(value)));
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Links the viewer makes point inside the page (#/...) or at the API; anything else is dropped.
function safeHref(value) {
  return value.startsWith("#/") || value.startsWith("/api/") ? value : "#/";
}

export function clear(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

export function when(ts) {
  if (ts === null || ts === undefined) return "";
  const d = new Date(ts * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function day(ts) {
  return when(ts).slice(0, 10);
}

export function chip(text, extra) {
  return h("span", { class: `chip ${extra || ""}`.trim() }, text);
}

export function toast(message, isError) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.className = isError ? "toast error" : "toast";
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, isError ? 6000 : 2500);
}
