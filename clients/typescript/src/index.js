// A client of the remindkit HTTP API (ES module, no dependencies): fetch for the
// routes and the event stream. Types: index.d.ts (from the OpenAPI document).
//
// Credentials: `token` as given; else, under Node, REMINDKIT_TOKEN or the user's local
// credential from the remindkit home when the URL is a running server of that home
// (src/node.js); in a browser, the login cookie of the page (`remindkit api open`).

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
   * @param {string} [baseUrl] e.g. http://127.0.0.1:8765 (default: the running server)
   * @param {{token?: string, fetch?: typeof fetch, EventSource?: any}} [options]
   */
  constructor(baseUrl, options = {}) {
    this.baseUrl = (baseUrl ?? "").replace(/\/+$/, "");
    this.token = options.token;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.EventSource = options.EventSource ?? globalThis.EventSource;
    this._ready = null;
  }

  /** Find the URL and credential once (under Node: src/node.js). */
  ready() {
    if (!this._ready) {
      this._ready = (async () => {
        if (globalThis.process?.versions?.node && typeof window === "undefined") {
          const { discover } = await import("./node.js");
          const found = discover(this.baseUrl || undefined, this.token);
          this.baseUrl = found.url;
          this.token = found.token;
        }
      })();
    }
    return this._ready;
  }

  async request(method, path, body) {
    await this.ready();
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
   * Subscribe to the event stream; `after` starts after a known id. It reconnects with
   * Last-Event-ID when the connection drops. With a token it reads the stream with fetch
   * (the token goes in the Authorization header, never in the URL); in a browser without
   * one, with EventSource and the page's login cookie. Returns a function that closes it.
   */
  events({ project, session, after, onEvent, onError } = {}) {
    const params = new URLSearchParams();
    if (project) params.set("project", project);
    if (session) params.set("session", session);
    let closed = false;
    let close = () => { closed = true; };
    const start = async () => {
      await this.ready();
      if (closed) return;
      if (!this.token && this.EventSource) {
        if (after !== undefined) params.set("after", String(after));
        const source = new this.EventSource(`${this.baseUrl}/v1/events?${params}`);
        for (const kind of KINDS) source.addEventListener(kind, (e) => onEvent?.(JSON.parse(e.data)));
        if (onError) source.onerror = onError;
        close = () => source.close();
        return;
      }
      const abort = new AbortController();
      close = () => { closed = true; abort.abort(); };
      let last = after;
      let delay = 1000;
      while (!closed) {
        try {
          const headers = { accept: "text/event-stream" };
          if (this.token) headers.authorization = `Bearer ${this.token}`;
          if (last !== undefined) headers["last-event-id"] = String(last);
          const response = await this.fetch(`${this.baseUrl}/v1/events?${params}`, { headers, signal: abort.signal });
          if (!response.ok) {
            const data = await response.json().catch(() => undefined);
            const err = data?.error ?? { code: "unavailable", message: `HTTP ${response.status}` };
            throw new RemindkitError(response.status, err.code, err.message);
          }
          for await (const event of readEvents(response.body)) {
            if (event.retry !== undefined) delay = event.retry;
            if (event.id === undefined || !event.data) continue;
            last = Number(event.id);
            onEvent?.(JSON.parse(event.data));
          }
        } catch (err) {
          if (closed) return;
          onError?.(err);
          if (err instanceof RemindkitError && err.status < 500 && err.status !== 409) return;
        }
        if (!closed) await new Promise((r) => setTimeout(r, delay));
      }
    };
    start().catch((err) => onError?.(err));
    return () => close();
  }
}

const KINDS = ["created", "modified", "paused", "resumed", "snoozed", "cancelled", "replaced",
  "fired", "delivered", "alerted", "failed", "skipped", "waiting"];

/** Server-sent events of a fetch body: {id, event, data, retry} each (the WHATWG rules). */
async function* readEvents(body) {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = { data: [] };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
      if (line === "") {
        if (event.data.length || event.id !== undefined || event.retry !== undefined) {
          yield { ...event, data: event.data.join("\n") };
        }
        event = { data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") event.data.push(value);
      else if (field === "id") event.id = value;
      else if (field === "event") event.event = value;
      else if (field === "retry" && /^\d+$/.test(value)) event.retry = Number(value);
    }
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

  /**
   * Send the person's message to the session's agent (one turn through the session's
   * adapter). Resolves to the reply ({ok, text, tags, error}, tags stripped from the
   * text); with `onText` the reply is streamed and `onText(textSoFar)` is called each
   * time it grows. A refusal or a failed turn (status 502) rejects with RemindkitError.
   */
  async send(text, { onText, signal } = {}) {
    const c = this.client;
    if (!onText) return c.request("POST", `${this.path}/messages`, { text });
    await c.ready();
    const headers = { accept: "text/event-stream", "content-type": "application/json" };
    if (c.token) headers.authorization = `Bearer ${c.token}`;
    const response = await c.fetch(`${c.baseUrl}${this.path}/messages`, {
      method: "POST", headers, body: JSON.stringify({ text }), signal,
    });
    if (!response.ok) {
      const data = await response.json().catch(() => undefined);
      const err = data?.error ?? { code: "unavailable", message: `HTTP ${response.status}` };
      throw new RemindkitError(response.status, err.code, err.message);
    }
    let shown = "";
    for await (const event of readEvents(response.body)) {
      const data = event.data ? JSON.parse(event.data) : {};
      if (event.event === "text") {
        shown = "append" in data ? shown + data.append : data.replace;
        onText(shown);
      } else if (event.event === "error") {
        throw new RemindkitError(data.status ?? 409, data.error.code, data.error.message);
      } else if (event.event === "reply") {
        if (!data.ok) throw new RemindkitError(502, data.error.code, data.error.message);
        return data;
      }
    }
    throw new RemindkitError(503, "unavailable", "the stream ended before the reply");
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
