// The pages about nmem itself: the context the next session starts with, the settings, the hooks' log.
import { get, query } from "./api.js";
import { clear, h } from "./dom.js";
import { projectList, projectSelect } from "./views.js";

// What the next SessionStart injects for a chosen project: the hook's own context builder, via REST.
const context = {
  async render(main, _parts, params) {
    const projects = await projectList();
    const project = params.get("project") || projects.current || projects.names[0] || "";
    const recovery = params.get("recovery") === "true";
    const form = h("form", { class: "filters", id: "context-form", onsubmit: (e) => {
      e.preventDefault();
      location.hash = "#/context" + query({ project: form.project.value, recovery: form.recovery.checked ? "true" : "" });
    } }, h("label", {}, "Project", projectSelect("project", projects, project)),
    h("label", { class: "check" }, h("input", { type: "checkbox", name: "recovery", checked: recovery }),
      " after a compaction or /clear"),
    h("button", { type: "submit", class: "primary" }, "Preview"));
    const shown = [h("h1", {}, "Context preview"), form];
    if (project) {
      const data = await get("/api/v1/context", { project, recovery: recovery ? "true" : "" });
      const stats = data.stats || {};
      shown.push(h("p", { class: "muted" }, `What the next session in ${data.project} starts with (${data.mode}): `,
        Object.entries(stats).filter(([, v]) => typeof v !== "object").map(([k, v]) => `${k} ${v}`).join(" · ")),
      data.context ? h("pre", { id: "context-block" }, data.context)
        : h("p", { class: "empty", id: "context-block" }, "Nothing worth injecting yet: the next session starts with no block."));
    } else {
      shown.push(h("p", { class: "empty" }, "No project recorded yet."));
    }
    clear(main, ...shown);
  },
};

// The effective settings, read-only: `nmem config set` changes them.
const settings = {
  async render(main) {
    const data = await get("/api/v1/settings");
    const rows = data.settings.map((s) => h("tr", {},
      h("td", {}, h("code", {}, s.name)), h("td", { class: "text" }, typeof s.value === "string" ? s.value : JSON.stringify(s.value)),
      h("td", { class: "muted" }, s.source), h("td", { class: "muted" }, s.env || "")));
    clear(main, h("h1", {}, "Settings"),
      h("p", { class: "muted" }, "Effective values and where each came from; secrets are masked. Change them with ",
        h("code", {}, "nmem config set NAME VALUE"), " or the environment variable."),
      h("table", { class: "settings", id: "settings" },
        h("thead", {}, h("tr", {}, h("th", {}, "Setting"), h("th", {}, "Value"), h("th", {}, "Source"), h("th", {}, "Environment"))),
        h("tbody", {}, rows)));
  },
};

// The end of the hooks' log: errors and warnings hooks wrote (nothing when all went well).
const log = {
  async render(main) {
    const data = await get("/api/v1/log", { limit: 300 });
    clear(main, h("h1", {}, "Log"), h("p", { class: "muted" }, data.path),
      data.lines.length ? h("pre", { id: "log" }, data.lines.slice().reverse().join("\n"))
        : h("p", { class: "empty", id: "log" }, data.exists ? "The log is empty." : "No log yet: the hooks have logged nothing."));
  },
};

export const systemPages = { context, settings, log };
