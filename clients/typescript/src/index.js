// A client of the remindkit HTTP API (ES module, no dependencies): fetch for the
// routes, EventSource for the event stream. Types: index.d.ts (from the OpenAPI document).

/** A refusal of the API: `code` is the stable error code, `status` the HTTP status. */
export class RemindkitError extends Error {
  constructor(status, code, message) {
    super(`${code}: ${message}`);
    this.name = "RemindkitError";
    this.status = status;
    this.code = code;
  }
}

const q = encodeURIComponent;

export class Client {
  /**
   * @param {string} baseUrl e.g. http://127.0.0.1:8765
   * @param {{token?: string, fetch?: typeof fetch, EventSource?: any}} [options]
   */
  constructor(baseUrl, options = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.EventSource = options.EventSource ?? globalThis.EventSource;
  }

  async request(method, path, body) {
    const headers = { accept: "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await this.fetch(this.baseUrl + path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 204) return undefined;
    const text = await response.text();
    let data;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = undefined;
    }
    if (!response.ok) {
      const err = data?.error ?? { code: "unavailable", message: `HTTP ${response.status}` };
      throw new RemindkitError(response.status, err.code, err.message);
    }
    return data;
  }

  session(project, session) {
    return new SessionClient(this, project, session);
  }

  sessions(project = "default") {
    return this.request("GET", `/v1/projects/${q(project)}/sessions`);
  }

  status() {
    return this.request("GET", "/v1/status");
  }

  /**
   * Subscribe to the event stream. The browser's EventSource reconnects by itself and
   * sends Last-Event-ID; `after` starts after a known id. Returns a function that closes it.
   */
  events({ project, session, after, onEvent, onError } = {}) {
    if (!this.EventSource) throw new Error("no EventSource here (Node: --experimental-eventsource)");
    const params = new URLSearchParams();
    if (project) params.set("project", project);
    if (session) params.set("session", session);
    if (after !== undefined) params.set("after", String(after));
    if (this.token) params.set("access_token", this.token);
    const source = new this.EventSource(`${this.baseUrl}/v1/events?${params}`);
    const kinds = ["created", "modified", "paused", "resumed", "snoozed", "cancelled", "replaced",
      "fired", "delivered", "failed", "skipped", "waiting"];
    for (const kind of kinds) {
      source.addEventListener(kind, (e) => onEvent?.(JSON.parse(e.data)));
    }
    if (onError) source.onerror = onError;
    return () => source.close();
  }
}

export class SessionClient {
  constructor(client, project, session) {
    this.client = client;
    this.project = project;
    this.id = session;
    this.path = `/v1/projects/${q(project)}/sessions/${q(session)}`;
    this.reminders = new RemindersClient(client, `${this.path}/reminders`);
  }

  get() {
    return this.client.request("GET", this.path);
  }

  events(options = {}) {
    return this.client.events({ ...options, project: this.project, session: this.id });
  }
}

export class RemindersClient {
  constructor(client, path) {
    this.client = client;
    this.path = path;
  }

  create(body) {
    return this.client.request("POST", this.path, body);
  }

  list({ all = false } = {}) {
    return this.client.request("GET", all ? `${this.path}?all=true` : this.path);
  }

  get(id) {
    return this.client.request("GET", `${this.path}/${q(id)}`);
  }

  update(id, patch) {
    return this.client.request("PATCH", `${this.path}/${q(id)}`, patch);
  }

  remove(id) {
    return this.client.request("DELETE", `${this.path}/${q(id)}`);
  }

  history(id, { limit = 100 } = {}) {
    return this.client.request("GET", `${this.path}/${q(id)}/history?limit=${limit}`);
  }
}
