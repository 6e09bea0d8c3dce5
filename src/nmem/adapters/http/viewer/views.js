// The pages: each renders into <main> from the REST API and may react to live changes.
import { api, get, path, query } from "./api.js";
import { activityChart, barChart } from "./charts.js";
import { chip, clear, day, h, toast, when } from "./dom.js";
import { systemPages } from "./system.js";

const NAMESPACES = ["decisions", "learnings", "gotchas", "patterns", "conventions", "blockers", "progress",
  "context", "tech-debt", "apis", "config", "security", "testing"];
const OBS_TYPES = ["command", "command_error", "file_read", "file_write", "file_edit", "file_error", "search",
  "git_commit", "git_push", "web_fetch", "web_search", "task_spawn", "mcp_call", "tool_other", "session_start",
  "session_end"];

function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

function summaryText(summary) {
  if (!summary) return "";
  if (typeof summary === "string") return summary;
  return summary.text || summary.intent || JSON.stringify(summary);
}

export function select(name, options, value, blank) {
  return h("select", { name }, blank !== undefined ? h("option", { value: "" }, blank) : null,
    options.map((o) => h("option", { value: o, selected: o === value }, o)));
}

// The recorded projects (REST /projects), asked once per page visit; a list to pick from, never free text.
export async function projectList() {
  const data = await get("/api/v1/projects");
  const names = data.results.map((p) => p.name);
  // The server's own project is offered first when something was recorded in it; otherwise the
  // viewer asks rather than filing under the directory the server happened to start in.
  const current = data.current && names.includes(data.current) ? data.current : "";
  return { names, current };
}

export function projectSelect(name, projects, value, blank) {
  const names = value && !projects.names.includes(value) ? [value, ...projects.names] : projects.names;
  return select(name, names, value, blank);
}

// A project badge that is also a link to that project's sessions.
function projectChip(project) {
  if (!project) return null;
  return h("a", { class: "chip project", href: "#/sessions" + query({ project }), title: `sessions of ${project}` }, project);
}

function memoryProject(m) {
  return m.project || (m.domain && m.domain.startsWith("project:") ? m.domain.slice(8) : null);
}

// Who wrote a prompt row: REST's label/role when it gives them, else derived from `source`.
export function promptKind(p) {
  const source = String(p.source || "user");
  const role = p.role || (source.startsWith("subagent") ? "subagent" : source === "agent" ? "reply" : source);
  const type = p.agent_type || (source.startsWith("subagent:") ? source.slice(9) : "");
  const label = p.label || (role === "subagent" ? `↳ ${type || "subagent"}` : role);
  return { role, label };
}

function promptChip(p) {
  const kind = promptKind(p);
  return chip(kind.label, `prompt-${kind.role}`);
}

// The body of a memory without its first line when that line is the summary; "" when nothing else is left.
export function bodyBeyondSummary(summary, content) {
  const text = String(content || "").trim();
  const head = String(summary || "").trim();
  if (!head) return text;
  if (text === head) return "";
  const [first, ...rest] = text.split("\n");
  const line = first.trim();
  if (line === head || (head.endsWith("…") && line.startsWith(head.slice(0, -1)))) return rest.join("\n").trim();
  return text;
}

const LONG_CHARS = 600;
const LONG_LINES = 8;

// Long text shows its start with a button that opens the rest.
export function collapsible(text, cls) {
  const box = h("div", { class: `text ${cls || ""}`.trim() }, text);
  if (text.length <= LONG_CHARS && text.split("\n").length <= LONG_LINES) return box;
  box.classList.add("collapsed");
  const toggle = h("button", { type: "button", class: "more", onclick: () => {
    const open = box.classList.toggle("collapsed");
    toggle.textContent = open ? "show all" : "show less";
  } }, "show all");
  return h("div", {}, box, toggle);
}

function field(label, input) {
  return h("label", {}, label, input);
}

// A subagent's tool call is marked as its (`↳ Explore`), as its replies are.
function subagentChip(o) {
  return o.subagent ? chip(`↳ ${o.subagent}`, "prompt-subagent") : null;
}

// An observation's text as listed: its preview, else its content with the path relative to the
// project root (a timeline's rows carry the whole content beside `rel_path`).
function obsText(o) {
  if (o.content_preview) return o.content_preview;
  const text = String(o.content || "");
  return o.file_path && o.rel_path ? text.split(o.file_path).join(o.rel_path) : text;
}

function obsLine(o, extra) {
  return h("li", { class: extra || "", "data-id": o.id },
    h("span", { class: "when" }, when(o.timestamp)),
    chip(o.obs_type, `type-${o.obs_type}`), subagentChip(o),
    o.is_pinned ? chip("pinned", "pinned") : null,
    h("a", { href: `#/record/${o.id}`, class: "text" }, obsText(o)),
    projectChip(o.project));
}

function promptLine(p) {
  return h("li", { class: "prompt-row", "data-prompt": p.id },
    h("span", { class: "when" }, when(p.timestamp)), promptChip(p),
    h("a", { href: `#/sessions/${p.session_id}`, class: "text" }, p.content_preview || p.content || ""),
    projectChip(p.project));
}

function summaryLine(x) {
  return h("li", { class: "summary-row", "data-session": x.id },
    h("span", { class: "when" }, when(x.ended_at || x.timestamp)), chip("summary", "summary"),
    h("a", { href: `#/sessions/${x.id}`, class: "text" }, x.content_preview || summaryText(x.summary)),
    projectChip(x.project));
}

// -- sessions ----------------------------------------------------------------------------------

const sessions = {
  async render(main, parts, params) {
    this.main = main;
    this.id = parts[0] || null;
    if (this.id) return this.trace(main, this.id);
    const project = params.get("project") || "";
    const [data, projects] = await Promise.all([get("/api/v1/sessions", { project: project || "*", limit: 100 }), projectList()]);
    const form = h("form", { class: "filters", onsubmit: (e) => {
      e.preventDefault();
      location.hash = "#/sessions" + query({ project: form.project.value });
    } }, field("Project", projectSelect("project", projects, project, "every project")),
    h("button", { type: "submit" }, "Filter"));
    const list = h("ul", { class: "list", id: "sessions" }, data.results.map((x) => h("li", {},
      h("div", { class: "row" },
        h("a", { href: `#/sessions/${x.id}` }, x.intent || "(no prompt yet)"),
        projectChip(x.project), x.ended_at ? chip("ended") : chip("active")),
      h("div", { class: "muted" }, `${when(x.started_at)} · ${x.prompts} prompts · ${x.actions} actions · ${x.ref}`))));
    clear(main, h("h1", {}, "Sessions"), form,
      data.results.length ? list : h("p", { class: "empty" }, "No sessions recorded yet."));
  },
  async trace(main, id) {
    const t = await get(path("sessions", id, "trace"));
    const prompts = t.prompts.map((p) => h("section", { class: "prompt" },
      h("div", { class: "who" }, promptChip(p), ` ${when(p.timestamp)}${p.ref ? " · " + p.ref : ""}`),
      collapsible(String(p.content || "")),
      h("ul", { class: "actions" }, p.observations.map((o) => obsLine(o)))));
    clear(main, h("p", {}, h("a", { href: "#/sessions" }, "← Sessions")),
      h("h1", {}, `Session ${t.ref}`),
      h("div", { class: "row" }, projectChip(t.project), h("span", { class: "muted" },
        `${when(t.started_at)} → ${t.ended_at ? when(t.ended_at) : "active"}`)),
      t.summary ? h("section", { class: "session-summary" }, chip("summary", "summary"), h("p", { class: "text" }, summaryText(t.summary))) : null,
      prompts.length ? prompts : h("p", { class: "empty" }, "Nothing recorded in this session yet."));
  },
  refresh: null,
  onChange(change) {
    if (!this.refresh) this.refresh = debounce(() => sessions.render(sessions.main, sessions.id ? [sessions.id] : [], new URLSearchParams(location.hash.split("?")[1] || "")), 400);
    const r = change.record || {};
    if (this.id ? (r.session_id === this.id || r.id === this.id) : change.kind !== "memory") this.refresh();
  },
};

// -- timeline ----------------------------------------------------------------------------------

const timeline = {
  async render(main, parts, params) {
    this.anchor = parts[0] || null;
    this.type = params.get("type") || "";
    this.project = params.get("project") || "";
    if (this.anchor) return this.around(main, this.anchor);
    const project = this.project || "*";
    const observations = this.type === "prompts" || this.type === "summaries" ? { results: [] }
      : get("/api/v1/search", { scope: "observations", order_by: "date_desc", limit: 100, project,
        obs_type: this.type === "actions" ? "" : this.type });
    const withWords = !this.type || this.type === "prompts" || this.type === "summaries";
    const [data, prompts, ended, projects] = await Promise.all([observations,
      withWords && this.type !== "summaries" ? get("/api/v1/search", { scope: "prompts", order_by: "date_desc", limit: 100, project }) : { results: [] },
      withWords && this.type !== "prompts" ? get("/api/v1/search", { scope: "sessions", order_by: "date_desc", limit: 50, project }) : { results: [] },
      projectList()]);
    const form = h("form", { class: "filters", onsubmit: (e) => {
      e.preventDefault();
      location.hash = "#/timeline" + query({ type: form.type.value, project: form.project.value });
    } }, field("Show", select("type", ["prompts", "summaries", "actions", ...OBS_TYPES], this.type, "everything")),
    field("Project", projectSelect("project", projects, this.project, "every project")),
    h("button", { type: "submit" }, "Filter"));
    const rows = [...data.results.map((o) => [o.timestamp, obsLine(o)]),
      ...prompts.results.map((p) => [p.timestamp, promptLine(p)]),
      ...ended.results.filter((x) => x.content_preview).map((x) => [x.ended_at || x.timestamp, summaryLine(x)])];
    rows.sort((a, b) => b[0] - a[0]);
    this.list = h("ul", { class: "list", id: "timeline" });
    let lastDay = null;
    for (const [ts, line] of rows) {
      if (day(ts) !== lastDay) {
        lastDay = day(ts);
        this.list.append(h("li", { class: "muted" }, h("b", {}, lastDay)));
      }
      this.list.append(line);
    }
    clear(main, h("h1", {}, "Timeline"), form,
      rows.length ? null : h("p", { class: "empty" }, "Nothing recorded yet."), this.list);
  },
  async around(main, anchor) {
    const t = await get("/api/v1/timeline", { anchor, before: 10, after: 10, project: "*" });
    const rows = [...t.before.map((o) => obsLine(o)), obsLine(t.anchor, "new"), ...t.after.map((o) => obsLine(o))];
    this.list = null;
    clear(main, h("p", {}, h("a", { href: "#/timeline" }, "← Timeline")),
      h("h1", {}, `Around observation ${t.anchor.id}`), h("ul", { class: "list" }, rows));
  },
  onChange(change) {
    if (!this.list || (change.kind !== "observation" && change.kind !== "prompt")) return;
    const r = change.record;
    if (this.project && r.project !== this.project) return;
    const first = this.list.querySelector("li[data-id], li[data-prompt], li[data-session]");
    if (change.kind === "prompt") {
      if (this.type && this.type !== "prompts") return;
      const line = promptLine(r);
      line.classList.add("new");
      this.list.insertBefore(line, first);
      return;
    }
    if (this.type && this.type !== "actions" && r.obs_type !== this.type) return;
    this.list.insertBefore(obsLine(r, "new"), first);  // under today's heading, above the newest
  },
};

// -- search ------------------------------------------------------------------------------------

const search = {
  async render(main, _parts, params) {
    const v = (name) => params.get(name) || "";
    const form = h("form", { class: "filters", id: "search-form", onsubmit: (e) => {
      e.preventDefault();
      const f = new FormData(form);
      location.hash = "#/search" + query(Object.fromEntries([...f.entries()].map(([k, x]) => [k, String(x).trim()])));
    } },
    field("Query", h("input", { type: "search", name: "query", value: v("query"), placeholder: "words, \"a phrase\", prefix*" })),
    field("Scope", select("scope", ["all", "observations", "prompts", "sessions", "memories"], v("scope") || "all")),
    field("Project", projectSelect("project", await projectList(), v("project"), "every project")),
    field("Type", select("obs_type", OBS_TYPES, v("obs_type"), "any")),
    field("Namespace", select("namespace", NAMESPACES, v("namespace"), "any")),
    field("From", h("input", { type: "date", name: "date_start", value: v("date_start") })),
    field("To", h("input", { type: "date", name: "date_end", value: v("date_end") })),
    field("Order", select("order_by", ["relevance", "date_desc", "date_asc"], v("order_by") || "relevance")),
    h("button", { type: "submit", class: "primary" }, "Search"));
    const results = h("div", { id: "results" });
    clear(main, h("h1", {}, "Search"), form, results);
    if (![...params.keys()].length) return;
    const args = Object.fromEntries(params.entries());
    args.project = args.project || "*";
    args.scope = args.scope || "all";
    args.limit = 50;
    const data = await get("/api/v1/search", args);
    clear(results, h("p", { class: "muted" }, `${data.count} results`),
      h("ul", { class: "list" }, data.results.map((r) => this.hit(r))));
  },
  hit(r) {
    const label = r.summary || r.content_preview || r.intent || r.content || r.id;
    const ref = r.urn || r.ref || String(r.id);
    const target = r.kind === "session" ? `#/sessions/${r.id}` : `#/record/${ref}`;
    const detail = h("div", { class: "detail" });
    const more = h("button", { type: "button", onclick: async () => {
      more.disabled = true;
      const full = await get(path("records", ref));
      clear(detail, h("pre", {}, full.content || summaryText(full.summary) || JSON.stringify(full, null, 2)),
        full.metadata ? h("pre", {}, JSON.stringify(full.metadata, null, 2)) : null);
    } }, "full");
    return h("li", { class: "hit" }, h("div", { class: "row" }, r.kind === "prompt" ? promptChip(r) : chip(r.kind || "record"),
      r.obs_type ? chip(r.obs_type, `type-${r.obs_type}`) : null, subagentChip(r), r.namespace ? chip(r.namespace) : null,
      projectChip(r.project || memoryProject(r)),
      h("a", { class: "text", href: target }, label), h("span", { class: "when" }, when(r.timestamp)), more), detail);
  },
};

// -- one record --------------------------------------------------------------------------------

const record = {
  async render(main, parts) {
    const r = await get(path("records", parts.join("/")));
    const pinned = !!r.is_pinned;
    const actions = r.kind === "observation" || r.kind === "memory" ? h("button", { type: "button", onclick: async () => {
      await api(pinned ? "DELETE" : "PUT", path("pins", r.kind === "memory" ? r.id : `o${r.id}`));
      toast(pinned ? "Unpinned" : "Pinned");
      record.render(main, parts);
    } }, pinned ? "Unpin" : "Pin") : null;
    clear(main, h("h1", {}, `${r.kind} ${r.ref || r.id}`),
      h("div", { class: "row" }, r.obs_type ? chip(r.obs_type, `type-${r.obs_type}`) : null, subagentChip(r),
        r.kind === "prompt" ? promptChip(r) : null,
        projectChip(r.project || memoryProject(r)), pinned ? chip("pinned", "pinned") : null,
        h("span", { class: "when" }, when(r.timestamp || r.updated_at || r.started_at)), actions,
        r.kind === "observation" ? h("a", { href: `#/timeline/${r.id}` }, "timeline around it") : null,
        r.session_id ? h("a", { href: `#/sessions/${r.session_id}` }, "its session") : null),
      h("p", { class: "muted" }, r.urn || ""),
      r.kind === "memory" ? h("p", { class: "summary text" }, h("b", {}, r.summary)) : null,
      h("pre", {}, (r.kind === "memory" ? bodyBeyondSummary(r.summary, r.content) : r.content) || (r.kind === "memory" ? "" : summaryText(r.summary)) || ""),
      r.metadata ? h("pre", {}, JSON.stringify(r.metadata, null, 2)) : null);
  },
};

// -- memories ----------------------------------------------------------------------------------

const memories = {
  async render(main, _parts, params) {
    this.main = main;
    this.params = params;
    const q = params.get("query") || "";
    const ns = params.get("namespace") || "";
    const filters = h("form", { class: "filters", onsubmit: (e) => {
      e.preventDefault();
      location.hash = "#/memories" + query({ query: filters.query.value.trim(), namespace: filters.namespace.value });
    } }, field("Find", h("input", { type: "search", name: "query", value: q })),
    field("Namespace", select("namespace", NAMESPACES, ns, "any")), h("button", { type: "submit" }, "Filter"));
    this.projects = await projectList();
    const create = this.form(null);
    this.list = h("ul", { class: "list", id: "memories" });
    clear(main, h("h1", {}, "Memories"), create, filters, this.list);
    await this.load();
  },
  async load() {
    const data = await get("/api/v1/search", { scope: "memories", project: "*", order_by: this.params.get("query") ? "relevance" : "date_desc",
      query: this.params.get("query") || "", namespace: this.params.get("namespace") || "", format: "full", limit: 100 });
    clear(this.list, data.results.length ? data.results.map((m) => this.item(m)) :
      h("li", { class: "empty" }, "No memories yet: remember one above."));
  },
  item(m) {
    const li = h("li", { class: "memory", "data-id": m.id });
    const pin = h("button", { type: "button", onclick: async () => {
      await api(m.is_pinned ? "DELETE" : "PUT", path("pins", m.id));
      toast(m.is_pinned ? "Unpinned" : "Pinned");
      await this.load();
    } }, m.is_pinned ? "Unpin" : "Pin");
    const edit = h("button", { type: "button", onclick: () => li.replaceChildren(this.form(m)) }, "Edit");
    const forget = h("button", { type: "button", class: "danger", onclick: async () => {
      if (!confirm(`Forget “${m.summary}”? Its text is erased.`)) return;
      await api("DELETE", path("memories", m.id));
      toast("Forgotten");
      await this.load();
    } }, "Forget");
    const body = bodyBeyondSummary(m.summary, m.content);
    li.append(h("div", { class: "row" }, h("b", { class: "summary text" }, m.summary), chip(m.namespace),
      memoryProject(m) ? projectChip(memoryProject(m)) : chip(m.domain),
      m.is_pinned ? chip("pinned", "pinned") : null, (m.tags || []).map((t) => chip(`#${t}`)),
      h("span", { class: "when" }, when(m.updated_at || m.timestamp))),
    h("div", { class: "content-box" }, body ? collapsible(body, "content") : null), h("div", { class: "row" }, edit, pin, forget));
    return li;
  },
  form(m) {
    const editing = !!m;
    const form = h("form", { class: "card", id: editing ? "edit-memory" : "new-memory", onsubmit: async (e) => {
      e.preventDefault();
      const summary = form.summary.value.trim();
      const body = { content: form.content.value, summary: summary || undefined,
        namespace: form.namespace.value, tags: form.tags.value.split(",").map((t) => t.trim()).filter(Boolean) };
      try {
        if (editing) {
          // An unchanged summary is not sent: the server then re-derives one it derived from the old content.
          if (summary === m.summary) delete body.summary;
          await api("PATCH", path("memories", m.id), body);
          toast("Saved");
        } else {
          body.domain = form.domain.value;
          if (body.domain === "project") {
            if (!form.project.value) throw new Error("Choose the project this memory belongs to.");
            body.project = form.project.value;
          }
          await api("POST", "/api/v1/memories", body);
          form.reset();
          toast("Remembered");
        }
        await this.load();
      } catch (err) {
        toast(err.message, true);
      }
    } },
    h("b", {}, editing ? "Edit memory" : "Remember something"),
    field("Summary (one line, optional)", h("input", { name: "summary", maxlength: 100, value: editing ? m.summary : "" })),
    field("Content (markdown)", h("textarea", { name: "content", required: true }, editing ? m.content : "")),
    h("div", { class: "row" },
      field("Namespace", select("namespace", NAMESPACES, editing ? m.namespace : "decisions")),
      editing ? null : field("Domain", select("domain", ["project", "user", "org"], "project")),
      editing ? null : field("Project", projectSelect("project", this.projects, this.projects.current, "choose…")),
      field("Tags", h("input", { name: "tags", value: editing ? (m.tags || []).join(", ") : "", placeholder: "comma, separated" })),
      h("button", { type: "submit", class: "primary" }, editing ? "Save" : "Remember"),
      editing ? h("button", { type: "button", onclick: () => this.load() }, "Cancel") : null));
    return form;
  },
  onChange(change) {
    if (change.kind !== "memory" || !this.list || this.list.querySelector("#edit-memory")) return;
    // Checked again when the refresh runs: an edit opened meanwhile is never thrown away.
    if (!this.refresh) this.refresh = debounce(() => { if (!this.list.querySelector("#edit-memory")) this.load(); }, 300);
    this.refresh();
  },
};

// -- status ------------------------------------------------------------------------------------

const status = {
  async render(main) {
    this.main = main;
    const [st, act] = await Promise.all([get("/api/v1/status"), get("/api/v1/activity", { days: 30 })]);
    const card = (label, value) => h("div", { class: "card-stat" }, h("b", {}, String(value)), h("span", { class: "muted" }, label));
    clear(main, h("h1", {}, "Status"),
      h("div", { class: "cards", id: "counts" }, card("sessions", st.sessions), card("prompts", st.prompts),
        // what the agent wrote, counted apart from what the user typed
        card("replies", st.agent_replies ?? 0), card("thinking", st.thinking ?? 0),
        card("subagent answers", st.subagent_replies ?? 0),
        card("observations", st.observations), card("memories", st.memories),
        card("database", `${(st.size_bytes / 1048576).toFixed(1)} MB`), card("schema", `v${st.schema_version}`)),
      h("h2", {}, "Activity, last 30 days (UTC)"), activityChart(act.days),
      h("div", { class: "charts" },
        h("section", {}, h("h2", {}, "Observation types"), barChart(st.by_obs_type, "observations by type")),
        h("section", {}, h("h2", {}, "Projects (sessions)"), barChart(st.by_project, "sessions by project")),
        h("section", {}, h("h2", {}, "Memory namespaces"), barChart(st.by_namespace, "memories by namespace"))),
      h("p", { class: "muted" }, `Database: ${st.database}`));
  },
  onChange() {
    if (!this.refresh) this.refresh = debounce(() => status.render(status.main), 1000);
    this.refresh();
  },
};

export const pages = { sessions, timeline, search, record, memories, status, ...systemPages };
