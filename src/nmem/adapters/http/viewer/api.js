// The REST API (/api/v1) and the change stream: the only things the viewer talks to.

export class ApiError extends Error {}

export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { "X-Nmem-CSRF": "1", Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const type = response.headers.get("content-type") || "";
  const data = type.includes("json") ? await response.json() : null;
  if (!response.ok) {
    const message = data && data.error && data.error.message ? data.error.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status === 401 ? `${message} (open /login?token=… once to sign in)` : message);
  }
  return data;
}

export function get(path, params) {
  return api("GET", path + query(params));
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") search.set(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export const path = (...parts) => "/api/v1/" + parts.map(encodeURIComponent).join("/");

// The live feed: one EventSource; the browser resumes it with Last-Event-ID after a drop.
export function listen(onChange, onState) {
  const source = new EventSource("/stream/changes", { withCredentials: true });
  source.addEventListener("open", () => onState(true));
  source.addEventListener("start", () => onState(true));
  source.addEventListener("error", () => onState(source.readyState === EventSource.OPEN));
  source.addEventListener("change", (event) => {
    try {
      onChange(JSON.parse(event.data));
    } catch (err) {
      console.error("bad change event", err);
    }
  });
  return source;
}
