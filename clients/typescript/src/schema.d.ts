// Generated from remindkit's OpenAPI document by scripts/gen-types.mjs: do not edit.

export interface HTTPValidationError {
  detail?: ValidationError[];
}

export interface ReminderIn {
  /** what to remind about; handed back to the session when it fires */
  prompt: string;
  /** label; a new reminder with a live name replaces the old one */
  name?: string | null;
  /** 30s, 5m, 2h, 1h30m or seconds */
  in?: string | number | null;
  /** RFC 3339 with offset, or a local date-time with timezone */
  at?: string | null;
  every?: string | number | null;
  /** 5 fields, or 6 with seconds first */
  cron?: string | null;
  /** IANA zone */
  timezone?: string | null;
  /** number of fires, or forever / -1 */
  repeat?: number | string | null;
  until?: string | null;
  alarm?: boolean;
  announce?: string | null;
  on_busy?: string;
  urgency?: string;
  misfire?: string;
}

export interface ReminderPatch {
  enabled?: boolean | null;
  snooze?: string | number | null;
  prompt?: string | null;
  name?: string | null;
  version?: number | null;
}

export interface ValidationError {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

export type Path = "/healthz"
  | "/v1/status"
  | "/v1/projects/{project}/sessions"
  | "/v1/projects/{project}/sessions/{session}"
  | "/v1/projects/{project}/sessions/{session}/reminders"
  | "/v1/projects/{project}/sessions/{session}/reminders/{reminder_id}"
  | "/v1/projects/{project}/sessions/{session}/reminders/{reminder_id}/history"
  | "/v1/events";
