// Types of the remindkit client, from the OpenAPI document (schema.d.ts, written by
// openapi-typescript: `npm run types`).
import type { components, operations, paths } from "./schema.js";

type Schemas = components["schemas"];
export type { components, operations, paths };
export type ReminderIn = Schemas["ReminderIn"];
export type ReminderPatch = Schemas["ReminderPatch"];
export type Reminder = Schemas["Reminder"];
export type ReminderCreated = Schemas["ReminderCreated"];
export type Fire = Schemas["Fire"];
export type Session = Schemas["SessionOut"];
export type Status = Schemas["Status"];
export type ErrorBody = Schemas["ErrorBody"];
export type MessageReply = Schemas["MessageReply"];

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
  constructor(status: number, code: string, message: string);
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

export interface ClientOptions {
  /** A bearer token; without one, Node finds the local credential, a browser uses its login cookie. */
  token?: string;
  fetch?: typeof fetch;
  EventSource?: unknown;
}

export class Client {
  constructor(baseUrl?: string, options?: ClientOptions);
  baseUrl: string;
  ready(): Promise<void>;
  session(project: string, session: string): SessionClient;
  sessions(project?: string): Promise<Session[]>;
  status(): Promise<Status>;
  events(options?: EventsOptions): () => void;
}

export class SessionClient {
  readonly reminders: RemindersClient;
  get(): Promise<Session>;
  /** The person's message to the agent; with onText the reply streams (the text so far). */
  send(text: string, options?: { onText?: (textSoFar: string) => void; signal?: AbortSignal }): Promise<MessageReply>;
  events(options?: Omit<EventsOptions, "project" | "session">): () => void;
}

export class RemindersClient {
  create(body: ReminderIn): Promise<ReminderCreated>;
  list(options?: { all?: boolean }): Promise<Reminder[]>;
  get(id: string): Promise<Reminder>;
  update(id: string, patch: ReminderPatch): Promise<Reminder>;
  remove(id: string): Promise<void>;
  history(id: string, options?: { limit?: number }): Promise<Fire[]>;
}
