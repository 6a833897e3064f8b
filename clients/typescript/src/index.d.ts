// Types of the remindkit client. Request bodies come from the OpenAPI document
// (schema.d.ts, `npm run types`); the objects answered are the API's reminders.
import type { ReminderIn, ReminderPatch } from "./schema.js";

export type { ReminderIn, ReminderPatch };

export interface Reminder {
  id: string;
  session: string | null;
  label: string | null;
  text: string;
  kind: "once" | "after" | "every" | "cron";
  state: "active" | "paused" | "done" | "cancelled" | "failed";
  next_fire_at: string | null;
  next_fire_local: string | null;
  tz: string;
  schedule: string;
  every_s: number | null;
  cron: string | null;
  until: string | null;
  repeat: number | null;
  fired_count: number;
  remaining: number | null;
  alarm: boolean;
  announce: string | null;
  urgency: "low" | "normal" | "critical";
  misfire: "latest" | "skip" | "all";
  on_busy: "wait" | "rebase" | "skip";
  last_error: string | null;
  source: string;
  created_at: string;
  updated_at: string;
  version: number;
  replaced?: string[];
}

export interface Fire {
  reminder_id: string;
  key: string;
  session: string | null;
  due_at: string;
  fired_at: string | null;
  late_ms: number | null;
  delivered_at: string | null;
  outcome: string;
  error: string | null;
}

export interface Session {
  id: string;
  project: string;
  state: string;
  adapter: string | null;
  title: string | null;
  busy: boolean;
}

export interface StreamEvent {
  id: number;
  at: string;
  kind: string;
  surface: string;
  session: string | null;
  project: string | null;
  reminder_id: string | null;
  detail: Record<string, unknown>;
  reminder?: { text: string; label: string | null; alarm: boolean; announce: string | null; urgency: string };
}

export class RemindkitError extends Error {
  status: number;
  code: string;
}

export interface EventsOptions {
  project?: string;
  session?: string;
  after?: number;
  onEvent?: (event: StreamEvent) => void;
  onError?: (error: unknown) => void;
}

export class Client {
  constructor(baseUrl: string, options?: { token?: string; fetch?: typeof fetch; EventSource?: unknown });
  session(project: string, session: string): SessionClient;
  sessions(project?: string): Promise<Session[]>;
  status(): Promise<Record<string, unknown>>;
  events(options?: EventsOptions): () => void;
}

export class SessionClient {
  readonly reminders: RemindersClient;
  get(): Promise<Session>;
  events(options?: Omit<EventsOptions, "project" | "session">): () => void;
}

export class RemindersClient {
  create(body: ReminderIn): Promise<Reminder>;
  list(options?: { all?: boolean }): Promise<Reminder[]>;
  get(id: string): Promise<Reminder>;
  update(id: string, patch: ReminderPatch): Promise<Reminder>;
  remove(id: string): Promise<void>;
  history(id: string, options?: { limit?: number }): Promise<Fire[]>;
}
