// Runs against a live `remindkit api` at REMINDKIT_API_URL (the project's test suite
// starts one: tests/api/test_typescript.py), in its remindkit home (REMINDKIT_HOME):
// the client finds the user's local credential there by itself.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, RemindkitError } from "../src/index.js";

const url = process.env.REMINDKIT_API_URL;
if (!url) throw new Error("set REMINDKIT_API_URL to a running `remindkit api`");
const client = new Client(url);
const session = `ts-${process.pid}`;

test("create, list, get, pause, resume, rename, remove", async () => {
  const rems = client.session("default", session).reminders;
  const made = await rems.create({ prompt: "from TypeScript", name: "ts", in: "24h", every: "1h" });
  assert.equal(made.text, "from TypeScript");
  assert.equal(made.every_s, 3600);
  assert.deepEqual((await rems.list()).map((r) => r.id), [made.id]);
  assert.equal((await rems.get(made.id)).label, "ts");
  assert.equal((await rems.update(made.id, { enabled: false })).state, "paused");
  assert.equal((await rems.update(made.id, { enabled: true })).state, "active");
  assert.equal((await rems.update(made.id, { name: "renamed" })).label, "renamed");
  assert.deepEqual(await rems.history(made.id), []);
  assert.equal(await rems.remove(made.id), undefined);
  assert.deepEqual(await rems.list(), []);
  assert.equal((await rems.list({ all: true }))[0].state, "cancelled");
  const me = await client.session("default", session).get();
  assert.equal(me.project, "default");
});

test("the local credential is found in the home; without it, 401", async () => {
  assert.equal((await client.status()).scope.scope, "admin");
  assert.equal((await new Client().status()).scope.scope, "admin"); // the running server's URL too
  await assert.rejects(() => new Client(url, { token: "" }).status(), (err) => err.status === 401 && err.code === "unauthorized");
});

test("refusals carry the status and the stable code", async () => {
  const rems = client.session("default", session).reminders;
  const cases = [
    [() => rems.create({ prompt: "x", in: "5 parsecs" }), 400, "invalid_duration"],
    [() => rems.create({ prompt: "x", every: "5s" }), 400, "interval_too_short"],
    [() => rems.get("rem_nothere"), 404, "not_found"],
    [() => client.session("nowhere", "s").reminders.list(), 404, "project_not_found"],
  ];
  for (const [call, status, code] of cases) {
    await assert.rejects(call, (err) => {
      assert.ok(err instanceof RemindkitError);
      assert.equal(err.status, status);
      assert.equal(err.code, code);
      return true;
    });
  }
  const gone = await rems.create({ prompt: "once", in: "1h" });
  await rems.remove(gone.id);
  await assert.rejects(() => rems.remove(gone.id), (err) => err.status === 409 && err.code === "not_active");
});

test("the event stream brings created and fired", async () => {
  const s = client.session("default", `${session}-ev`);
  const seen = [];
  let made;
  const fired = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no fire within 60 s: ${JSON.stringify(seen)}`)), 60_000);
    const close = s.events({
      after: 0, // from the first event of the store: nothing is missed however late it connects
      onEvent: (e) => {
        seen.push(e);
        if (made && e.reminder_id === made.id && e.kind === "fired") {
          clearTimeout(timer);
          close();
          resolve(e);
        }
      },
    });
  });
  // the stream is read: a first change shows up on it
  const warm = await s.reminders.create({ prompt: "warm up", in: "1h" });
  for (let i = 0; i < 300 && !seen.some((e) => e.reminder_id === warm.id); i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(seen.some((e) => e.reminder_id === warm.id && e.kind === "created"), JSON.stringify(seen));
  made = await s.reminders.create({ prompt: "fire soon", in: "2s", announce: "hello" });
  const event = await fired;
  assert.equal(event.reminder.announce, "hello");
  assert.equal(event.session, `${session}-ev`);
  const ids = seen.map((e) => e.id);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
});

test("a message to the session's agent, its reply streamed", { skip: !process.env.REMINDKIT_CHAT_SESSION }, async () => {
  const s = client.session("default", process.env.REMINDKIT_CHAT_SESSION);
  const plain = await s.send("hello");
  assert.equal(plain.ok, true);
  assert.ok(plain.text.length > 0);
  const seen = [];
  const streamed = await s.send("hello again", { onText: (t) => seen.push(t) });
  assert.ok(seen.length > 1, JSON.stringify(seen));
  assert.equal(seen.at(-1), streamed.text);
  assert.ok(!streamed.text.includes("<schedule"), streamed.text);
  assert.equal(streamed.tags.length, 1);
  assert.equal(streamed.tags[0].ok, true);
  await assert.rejects(
    () => client.session("default", `${session}-nobody`).send("hi", { onText: () => {} }),
    (err) => err.status === 404 && err.code === "session_not_found",
  );
});
