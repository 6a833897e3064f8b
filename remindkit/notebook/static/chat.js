// remindkit chat view: the transcript as a person sees it, and a box to type in.
//
// The kernel syncs `lines` ({seq, who, text}: you, agent, or a `fired` marker
// that stands for a hidden <schedule-fired> turn) and `busy` while a turn runs.
// A typed message shows at once; the kernel runs the turn in a thread, so the
// reply (and any fired turn later) arrives while the notebook is idle. Where the
// reply is streamed (the web page), `streaming` holds its text so far: shown as the
// agent's line being written, below the transcript, until the transcript has it.

function node(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

const WHO = { you: "you", agent: "agent" };
const CLOCK = '<svg viewBox="0 0 16 16" width="12" height="12" aria-hidden="true" fill="none" stroke="currentColor" ' +
  'stroke-width="1.6" stroke-linecap="round"><circle cx="8" cy="8.6" r="5.6"/><path d="M8 5.6v3.2l2.2 1.3"/>' +
  '<path d="M2.2 3.6 4 2M13.8 3.6 12 2"/></svg>';

function render({ model, el }) {
  const root = node("div", "rk-chat");
  const log = node("div", "rk-chat-log");
  const row = node("form", "rk-chat-input");
  const input = node("input", "rk-chat-text");
  input.type = "text";
  input.placeholder = model.get("placeholder") || "Message the agent…";
  const sendButton = node("button", "rk-btn rk-chat-send", "Send");
  sendButton.type = "submit";
  row.append(input, sendButton);
  root.append(log, row);
  el.append(root);

  let pending = []; // typed here, not yet in the kernel's transcript: {text, after}

  function lineElement(line) {
    const div = node("div", `rk-line rk-${line.who}`);
    div.dataset.seq = String(line.seq);
    if (line.who === "fired") {
      // "⏰ check back fired 14:05": the clock as an icon, so it shows without an emoji font
      const text = line.text.startsWith("⏰ ") ? line.text.slice(2) : line.text;
      const clock = node("span", "rk-icon");
      clock.innerHTML = CLOCK;
      div.append(clock, document.createTextNode(" " + text));
      div.title = line.text;
      return div;
    }
    div.append(node("span", "rk-who", WHO[line.who] || line.who), node("span", "rk-text", line.text));
    return div;
  }

  function draw() {
    const lines = model.get("lines") || [];
    const lastSeq = lines.length ? lines[lines.length - 1].seq : 0;
    pending = pending.filter((p) => !lines.some((l) => l.who === "you" && l.seq > p.after && l.text === p.text));
    const items = lines.map(lineElement);
    for (const p of pending) items.push(lineElement({ seq: lastSeq, who: "you", text: p.text }));
    const streaming = model.get("streaming");
    if (typeof streaming === "string" && streaming) {
      const line = lineElement({ seq: lastSeq, who: "agent", text: streaming });
      line.classList.add("rk-streaming");
      items.push(line);
    } else if (model.get("busy") || pending.length) {
      items.push(node("div", "rk-line rk-thinking", model.get("waiting") || "agent is thinking…"));
    }
    if (!items.length) items.push(node("div", "rk-line rk-empty", "No messages yet."));
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.replaceChildren(...items);
    if (atBottom || pending.length) log.scrollTop = log.scrollHeight;
  }

  row.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    const lines = model.get("lines") || [];
    pending.push({ text, after: lines.length ? lines[lines.length - 1].seq : 0 });
    input.value = "";
    model.send({ action: "send", text });
    draw();
  });

  model.on("change:lines", draw);
  model.on("change:busy", draw);
  model.on("change:streaming", draw);
  model.on("change:waiting", draw);
  draw();
  log.scrollTop = log.scrollHeight;
  return () => {
    model.off("change:lines", draw);
    model.off("change:busy", draw);
    model.off("change:streaming", draw);
    model.off("change:waiting", draw);
  };
}

export default { render };
