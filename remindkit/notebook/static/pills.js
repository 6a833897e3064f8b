// remindkit pills: one pill per live reminder, counting down in the browser.
//
// The kernel syncs `pills` (each with its due time `due_ms`); this view counts
// down from those due times every second with the browser's clock, so it keeps
// counting while a cell runs. A click on × hides the pill at once and then tells
// the kernel, which cancels the reminder in the store when it takes the message:
// at once where widget messages run on a kernel subshell (JupyterLab 4.6 with
// ipykernel 7), only once the cell ends elsewhere, so the page never waits.
// Alerts come as custom messages: a banner, the alarm through an <audio>
// element, and `announce` spoken by speechSynthesis. A pill whose fire waits (for its
// session) reads "waiting" and says why.

const PLAYED = (globalThis.__remindkitAlerts ??= new Set()); // one page plays an alert once
const MAX_BANNERS = 5;
// Icons as inline SVG (fill: currentColor): they render without an emoji font.
const ICONS = {
  pause: '<rect x="3" y="2" width="3.5" height="12" rx="1"/><rect x="9.5" y="2" width="3.5" height="12" rx="1"/>',
  play: '<path d="M4 2.5v11l9.5-5.5z"/>',
  snooze: '<path d="M13.8 10.2A6.2 6.2 0 0 1 5.8 2.2a6.2 6.2 0 1 0 8 8z"/>',
  bell: '<path d="M8 1.2a1 1 0 0 1 1 1v.7a4.6 4.6 0 0 1 3.6 4.5v3.4l1.6 1.6v.6H1.8v-.6l1.6-1.6V7.4A4.6 4.6 0 0 1 7 2.9v-.7a1 1 0 0 1 1-1zM6.4 14h3.2a1.6 1.6 0 0 1-3.2 0z"/>',
};

function icon(name) {
  const span = document.createElement("span");
  span.className = `rk-icon rk-icon-${name}`;
  span.innerHTML = `<svg viewBox="0 0 16 16" width="12" height="12" fill="currentColor" aria-hidden="true">${ICONS[name]}</svg>`;
  return span;
}

export function secondsLeft(dueMs, nowMs) {
  if (dueMs === null || dueMs === undefined) return null;
  return Math.max(0, Math.ceil((dueMs - nowMs) / 1000));
}

export function formatLeft(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  let rest = Math.max(0, seconds);
  const days = Math.floor(rest / 86400);
  rest -= days * 86400;
  const hours = Math.floor(rest / 3600);
  rest -= hours * 3600;
  const minutes = Math.floor(rest / 60);
  const secs = rest - minutes * 60;
  const two = (n) => String(n).padStart(2, "0");
  if (days) return `${days}d ${two(hours)}:${two(minutes)}`;
  if (hours) return `${hours}:${two(minutes)}:${two(secs)}`;
  return `${minutes}:${two(secs)}`;
}

function node(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

function button(className, content, title, onClick) {
  const b = node("button", `rk-btn ${className}`);
  b.append(content);
  b.type = "button";
  b.title = title;
  b.setAttribute("aria-label", title);
  b.addEventListener("click", (event) => {
    event.preventDefault();
    event.stopPropagation();
    onClick();
  });
  return b;
}

function render({ model, el }) {
  const root = node("div", "rk-pills-root");
  const status = node("div", "rk-status");
  const list = node("div", "rk-pills");
  const notice = node("div", "rk-notice");
  const banners = node("div", "rk-alerts");
  const audio = node("audio", "rk-audio");
  audio.preload = "auto";
  audio.src = model.get("alarm_src");
  root.append(status, banners, list, notice, audio);
  el.append(root);

  const hidden = new Set(); // cancelled here; gone from the kernel's list soon
  const optimistic = new Map(); // id -> state shown before the kernel confirms it

  function send(action, id, extra) {
    model.send({ action, id, ...(extra || {}) });
  }

  function pillElement(p) {
    const state = optimistic.get(p.id) ?? p.state;
    const pill = node("div", `rk-pill rk-${state}${p.alarm ? " rk-has-alarm" : ""}`);
    pill.dataset.id = p.id;
    pill.dataset.label = p.label;
    pill.dataset.state = state;
    pill.title = p.text + (p.announce ? `\nannounce: ${p.announce}` : "");
    // a fire of it came due and waits (for its session): say why, not just "due"
    if (p.waiting) {
      pill.dataset.waiting = p.waiting;
      pill.title += `\nwaiting: ${p.waiting}`;
    }
    const label = node("span", "rk-label", p.label);
    if (p.alarm) label.prepend(icon("bell"));
    const kind = node("span", "rk-kind", p.schedule);
    const left = node("span", "rk-left");
    left.dataset.due = p.due_ms === null ? "" : String(p.due_ms);
    pill.append(label, kind);
    if (model.get("show_session") && p.session) pill.append(node("span", "rk-session", p.session));
    pill.append(left);
    if (p.waiting) pill.append(node("span", "rk-why", `waiting: ${p.waiting}`));
    if (state === "paused") {
      pill.append(button("rk-resume", icon("play"), "Resume", () => {
        optimistic.set(p.id, "active");
        send("resume", p.id);
        draw();
      }));
    } else {
      pill.append(button("rk-pause", icon("pause"), "Pause", () => {
        optimistic.set(p.id, "paused");
        send("pause", p.id);
        draw();
      }));
    }
    pill.append(button("rk-snooze", icon("snooze"), `Snooze ${model.get("snooze")}`, () => {
      send("snooze", p.id);
      left.textContent = "snoozed";
    }));
    pill.append(button("rk-cancel", "×", "Cancel this reminder", () => {
      hidden.add(p.id);
      pill.remove();
      send("cancel", p.id);
      tick();
    }));
    return pill;
  }

  function draw() {
    const items = model.get("pills") || [];
    const byId = new Map(items.map((p) => [p.id, p]));
    for (const id of [...hidden]) if (!byId.has(id)) hidden.delete(id);
    for (const [id, state] of [...optimistic]) {
      const p = byId.get(id);
      if (!p || p.state === state) optimistic.delete(id);
    }
    const shown = items.filter((p) => !hidden.has(p.id)).map(pillElement);
    if (shown.length) list.replaceChildren(...shown);
    else list.replaceChildren(node("span", "rk-empty", "No active reminders."));
    tick();
  }

  function tick() {
    const now = Date.now();
    let count = 0;
    let next = null;
    for (const pill of list.querySelectorAll(".rk-pill")) {
      count += 1;
      const left = pill.querySelector(".rk-left");
      if (pill.dataset.state === "paused") {
        left.textContent = "paused";
        continue;
      }
      if (left.textContent === "snoozed") continue;
      const due = left.dataset.due === "" ? null : Number(left.dataset.due);
      const secs = secondsLeft(due, now);
      left.textContent = secs === 0 ? (pill.dataset.waiting ? "waiting" : "due") : formatLeft(secs);
      left.dataset.seconds = secs === null ? "" : String(secs);
      if (secs !== null && (next === null || secs < next.secs)) next = { secs, label: pill.dataset.label };
    }
    const where = model.get("alerts");
    const parts = [`${count} active`];
    if (next) parts.push(`next: ${next.label} in ${formatLeft(next.secs)}`);
    if (where) parts.push(`alarms: ${where}`);
    status.textContent = parts.join(" · ");
  }

  function showAlert(a) {
    if (PLAYED.has(a.key)) return;
    PLAYED.add(a.key);
    const banner = node("div", `rk-alert rk-${a.urgency || "normal"}`);
    banner.dataset.key = a.key;
    banner.dataset.label = a.label;
    const words = a.announce || a.text;
    banner.append(icon("bell"), node("span", "rk-alert-text", `${a.label || "reminder"}${words ? " — " + words : ""}`));
    banner.append(button("rk-alert-snooze", "Snooze", `Snooze ${model.get("snooze")}`, () => {
      send("snooze", a.id);
      banner.remove();
    }));
    banner.append(button("rk-alert-dismiss", "Dismiss", "Dismiss", () => {
      audio.pause();
      if (globalThis.speechSynthesis) globalThis.speechSynthesis.cancel();
      banner.remove();
    }));
    banners.prepend(banner);
    while (banners.children.length > MAX_BANNERS) banners.lastChild.remove();
    banner.dataset.audio = "off";
    if (a.alarm) {
      banner.dataset.audio = "starting";
      try {
        audio.currentTime = 0;
        audio.play().then(
          () => { banner.dataset.audio = "played"; },
          () => { banner.dataset.audio = "blocked"; },
        );
      } catch (e) {
        banner.dataset.audio = "failed";
      }
    }
    banner.dataset.speech = "off";
    if (a.announce) {
      if (globalThis.speechSynthesis && globalThis.SpeechSynthesisUtterance) {
        globalThis.speechSynthesis.speak(new SpeechSynthesisUtterance(a.announce));
        banner.dataset.speech = "spoken";
      } else {
        banner.dataset.speech = "unavailable";
      }
    }
  }

  const onPills = () => draw();
  const onNotice = () => { notice.textContent = model.get("notice") || ""; };
  const onAlarm = () => { audio.src = model.get("alarm_src"); };
  const onMsg = (msg) => { if (msg && msg.type === "alert") showAlert(msg); };
  model.on("change:pills", onPills);
  model.on("change:alerts", tick);
  model.on("change:notice", onNotice);
  model.on("change:alarm_src", onAlarm);
  model.on("msg:custom", onMsg);
  draw();
  onNotice();
  const timer = setInterval(tick, 250); // the text changes once a second, close to the second
  return () => {
    clearInterval(timer);
    model.off("change:pills", onPills);
    model.off("change:alerts", tick);
    model.off("change:notice", onNotice);
    model.off("change:alarm_src", onAlarm);
    model.off("msg:custom", onMsg);
  };
}

export default { render };
