// Checked by `npm run typecheck` (tsc, strict): the client's types hold together with
// the generated schema. Not run.
import { Client, RemindkitError, type MessageReply, type Reminder, type ReminderIn } from "../src/index.js";

export async function example(): Promise<string> {
  const body: ReminderIn = { prompt: "check the deploy", in: "1h", repeat: 3, alarm: true };
  const made = await new Client().session("default", "s1").reminders.create(body);
  const replaced: string[] = made.replaced;
  const again: Reminder = await new Client("http://127.0.0.1:8765").session("default", "s1").reminders.update(made.id, { enabled: false });
  const status = await new Client().status();
  const err = new RemindkitError(400, "invalid_duration", "no");
  return `${again.state} ${replaced.length} ${status.scope.scope} ${err.code}`;
}

export async function chat(): Promise<string> {
  const reply: MessageReply = await new Client().session("default", "s1").send("hi", { onText: (t: string) => t.length });
  return reply.ok ? reply.text : (reply.error?.code ?? "");
}
