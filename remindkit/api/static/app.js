// The web page of `remindkit api`: a chat with the session's agent, with the
// notebook panel's pills and chat views (pills.js, chat.js, served from the
// notebook package) on a small model that stands in for the kernel's. A message
// goes to POST …/messages and its reply is read as it streams; the rest it reads
// with fetch and updates when the event stream says something changed (a fire: the
// banner, the alarm and the announcement; its turn's reply: in the thread under
// the fired marker): no polling. It is let in by the login cookie
// (`remindkit api open`): it holds no token itself.
import pillsView from "/static/pills.js";
import chatView from "/static/chat.js";

const params = new URLSearchParams(location.search);
const project = params.get("project") || "default";
const session = params.get("session") || "default";
const base = `/v1/projects/${encodeURIComponent(project)}/sessions/${encodeURIComponent(session)}`;
const SNOOZE = "5m";

async function call(method, path, body) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 204) return null;
  const data = await r.json().catch(() => null);
  if (r.status === 401) throw new Error("not logged in: run `remindkit api open` and use the URL it gives");
  if (!r.ok) throw new Error(data?.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${r.status}`);
  return data;
}

// What an anywidget model offers a view: get, on/off change events, send, custom messages.
function model(initial, onSend) {
  const data = { ...initial };
  const handlers = new Map();
  const fire = (event, arg) => { for (const fn of handlers.get(event) || []) fn(arg); };
  return {
    get: (key) => data[key],
    set(key, value) { data[key] = value; fire(`change:${key}`); },
    on(event, fn) { if (!handlers.has(event)) handlers.set(event, []); handlers.get(event).push(fn); },
    off(event, fn) { const l = handlers.get(event) || []; const i = l.indexOf(fn); if (i >= 0) l.splice(i, 1); },
    send: (msg) => onSend(msg),
    message: (msg) => fire("msg:custom", msg),
  };
}

const pills = model(
  { pills: [], snooze: SNOOZE, show_session: false, alarm_src: "/static/alarm.wav", alerts: "this page", notice: "" },
  async ({ action, id }) => {
    const change = { cancel: null, pause: { enabled: false }, resume: { enabled: true }, snooze: { snooze: SNOOZE } };
    if (!(action in change)) return;
    try {
      if (action === "cancel") await call("DELETE", `${base}/reminders/${encodeURIComponent(id)}`);
      else await call("PATCH", `${base}/reminders/${encodeURIComponent(id)}`, change[action]);
      pills.set("notice", "");
    } catch (e) {
      pills.set("notice", String(e.message));
    }
    refresh();
  },
);
const chat = model(
  { lines: [], busy: false, streaming: null, waiting: "", placeholder: "Message the agent…" },
  (msg) => { if (msg.action === "send") say(msg.text); },
);

// One server-sent event block ("event: kind\ndata: {...}") of the reply's stream.
function parseEvent(block) {
  let kind = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) kind = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  return { kind, data: data.length ? JSON.parse(data.join("\n")) : {} };
}

let turns = Promise.resolve(); // the person's messages go one after another
function say(text) {
  turns = turns.then(() => talk(text));
}

async function talk(text) {
  chat.set("busy", true);
  chat.set("waiting", "");
  let shown = "";
  try {
    const r = await fetch(`${base}/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ text }),
    });
    if (!r.ok) {
      const data = await r.json().catch(() => null);
      if (r.status === 401) throw new Error("not logged in: run `remindkit api open` and use the URL it gives");
      throw new Error(data?.error ? `${data.error.code}: ${data.error.message}` : `HTTP ${r.status}`);
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const { kind, data } = parseEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (kind === "waiting") chat.set("waiting", "waiting: the agent is answering a reminder…");
        else if (kind === "started") chat.set("waiting", "");
        else if (kind === "text") {
          shown = "append" in data ? shown + data.append : data.replace;
          chat.set("streaming", shown);
        } else if (kind === "reply" && !data.ok) {
          throw new Error(`the agent failed: ${data.error.code}: ${data.error.message}`);
        } else if (kind === "error") {
          throw new Error(`${data.error.code}: ${data.error.message}`);
        }
      }
    }
    pills.set("notice", "");
  } catch (e) {
    pills.set("notice", String(e.message));
  } finally {
    await refresh();
    chat.set("streaming", null);
    chat.set("waiting", "");
    chat.set("busy", false);
  }
}

pillsView.render({ model: pills, el: document.getElementById("pills") });
chatView.render({ model: chat, el: document.getElementById("chat") });

// Each call reads the view once more, after any read already under way: a reply
// stored after that read began is in the next one.
let running = null;
let next = null;
function refresh() {
  if (!running) {
    running = load().finally(() => { running = null; });
    return running;
  }
  if (!next) next = running.then(() => { next = null; return refresh(); });
  return next;
}

async function load() {
  try {
    const view = await call("GET", `${base}/view`);
    pills.set("pills", view.pills);
    chat.set("lines", view.lines);
  } catch (e) {
    pills.set("notice", String(e.message));
  }
}

const live = document.getElementById("live");
function connect() {
  const q = new URLSearchParams({ project, session });
  const source = new EventSource(`/v1/events?${q}`);
  source.onopen = () => { live.dataset.state = "live"; live.textContent = "live"; refresh(); };
  source.onerror = () => { live.dataset.state = "reconnecting"; live.textContent = "reconnecting…"; };
  const kinds = ["created", "modified", "paused", "resumed", "snoozed", "cancelled", "replaced", "fired",
    "delivered", "alerted", "failed", "skipped", "waiting"];
  for (const kind of kinds) {
    source.addEventListener(kind, (e) => {
      const event = JSON.parse(e.data);
      if (kind === "fired" && event.reminder) {
        const r = event.reminder;
        pills.message({ type: "alert", key: `event-${event.id}`, id: event.reminder_id, label: r.label,
          text: r.text, announce: r.announce, alarm: r.alarm, urgency: r.urgency });
      }
      refresh();
    });
  }
}

const where = document.getElementById("where");
where.project.value = project;
where.session.value = session;

const add = document.getElementById("add");
add.addEventListener("submit", async (event) => {
  event.preventDefault();
  const f = add.elements;
  const body = { prompt: f.prompt.value, alarm: f.alarm.checked };
  for (const key of ["in", "every", "name", "announce"]) if (f[key].value.trim()) body[key] = f[key].value.trim();
  const error = add.querySelector(".rk-form-error");
  try {
    await call("POST", `${base}/reminders`, body);
    error.textContent = "";
    add.reset();
  } catch (e) {
    error.textContent = String(e.message);
  }
  refresh();
});

refresh();
connect();
