"""Tables of the store (SQLAlchemy Core). Times are integer microseconds, UTC.

The Alembic migrations in ``migrations/versions`` create and change these
tables; this module mirrors the latest revision for queries.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

reminders = Table(
    "reminders",
    metadata,
    Column("id", Text, primary_key=True),
    Column("session_id", Text, nullable=True),
    Column("label", Text, nullable=True),
    Column("text", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("spec", Text, nullable=False),  # Schedule.to_json()
    Column("tz", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("next_fire_at", BigInteger, nullable=True),
    Column("fired_count", Integer, nullable=False, server_default="0"),
    Column("alarm", Boolean, nullable=False, server_default=text("false")),
    Column("announce", Text, nullable=True),
    Column("urgency", Text, nullable=False, server_default="normal"),
    Column("misfire", Text, nullable=False, server_default="latest"),
    Column("catchup_cap", Integer, nullable=False, server_default="10"),
    Column("on_busy", Text, nullable=False, server_default="wait"),
    Column("last_error", Text, nullable=True),
    Column("source", Text, nullable=False, server_default="api"),
    Column("slot", Integer, nullable=True),
    Column("snoozed", Boolean, nullable=False, server_default=text("false")),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("version", Integer, nullable=False, server_default="1"),
    Column("quarantine", Text, nullable=True),  # models.Quarantine: set aside by an engine
)
Index("ix_reminders_due", reminders.c.state, reminders.c.next_fire_at)
Index("ix_reminders_session", reminders.c.session_id, reminders.c.state)
Index(
    "ux_reminders_live_label",
    reminders.c.session_id,
    reminders.c.label,
    unique=True,
    # Partial on both databases (migration 0001 says so for each). Only SQLite's predicate
    # is named here: a postgresql_where would load PostgreSQL's dialect (and asyncio) in
    # every process, a fifth of a CLI command's start-up, and nothing builds DDL from this.
    sqlite_where=text("state IN ('active','paused') AND label IS NOT NULL"),
)

occurrences = Table(
    "occurrences",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("reminder_id", Text, nullable=False),
    Column("due_at", BigInteger, nullable=False),
    Column("session_id", Text, nullable=True),
    Column("state", Text, nullable=False),
    Column("owner", Text, nullable=True),
    Column("token", Text, nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("fired_at", BigInteger, nullable=True),
    Column("delivered_at", BigInteger, nullable=True),
    Column("missed", Integer, nullable=False, server_default="0"),
    Column("position", Integer, nullable=True),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("error", Text, nullable=True),
    Column("delivered_to", Text, nullable=True),
    Column("alert", Text, nullable=True),  # None | pending | playing | done | failed | muted
    Column("wait_for", Text, nullable=True),  # WaitFor, while waiting
    Column("handed_at", BigInteger, nullable=True),  # its turn started
    UniqueConstraint("reminder_id", "due_at", name="uq_occurrence_key"),
)
Index("ix_occurrences_state", occurrences.c.state, occurrences.c.lease_until)
Index("ix_occurrences_session", occurrences.c.session_id, occurrences.c.state)
Index("ix_occurrences_fired", occurrences.c.fired_at)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("adapter", Text, nullable=True),
    Column("config", Text, nullable=False, server_default="{}"),
    Column("state", Text, nullable=False, server_default="active"),
    Column("created_at", BigInteger, nullable=False),
    Column("last_active_at", BigInteger, nullable=False),
    Column("busy_since", BigInteger, nullable=True),  # set by `session busy`, cleared by `idle`
    Column("turn_owner", Text, nullable=True),
    Column("turn_token", Text, nullable=True),
    Column("turn_until", BigInteger, nullable=True),
    Column("parent_id", Text, nullable=True),
    Column("title", Text, nullable=True),
    Column("fallback", Text, nullable=False, server_default="fresh"),  # FallbackPolicy
    Column("failures", Integer, nullable=False, server_default="0"),  # failed turns in a row
    Column("last_error", Text, nullable=True),
    Column("project", Text, nullable=False, server_default="default"),
)
Index("ix_sessions_project", sessions.c.project, sessions.c.state)

projects = Table(
    "projects",
    metadata,
    Column("name", Text, primary_key=True),
    Column("reminders", Boolean, nullable=False, server_default=text("true")),  # the feature flag
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Text, primary_key=True),
    Column("hash", Text, nullable=False, unique=True),  # sha256 hex of the bearer token
    Column("project", Text, nullable=True),  # NULL: admin
    Column("session", Text, nullable=True),  # NULL: the whole project
    Column("read_only", Boolean, nullable=False, server_default=text("false")),
    Column("created_at", BigInteger, nullable=False),
    Column("last_used_at", BigInteger, nullable=True),
)

flags = Table(
    "flags",
    metadata,
    Column("name", Text, primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

engines = Table(
    "engines",
    metadata,
    Column("id", Text, primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("role", Text, nullable=False, server_default="engine"),
    Column("alert_priority", Integer, nullable=False, server_default="0"),
    Column("started_at", BigInteger, nullable=False),
    Column("heartbeat_at", BigInteger, nullable=False),
)

leases = Table(
    "leases",
    metadata,
    Column("name", Text, primary_key=True),
    Column("holder", Text, nullable=False),
    Column("priority", Integer, nullable=False, server_default="0"),
    Column("until", BigInteger, nullable=False),
)

messages = Table(
    "messages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_id", Text, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("role", Text, nullable=False),  # system | user | assistant | tool
    Column("kind", Text, nullable=False, server_default="chat"),  # chat | fired | feedback | tool
    Column("content", Text, nullable=True),
    Column("hidden", Boolean, nullable=False, server_default=text("false")),
    Column("tool_calls", Text, nullable=True),  # JSON: the assistant's tool calls (OpenAI shape)
    Column("tool_call_id", Text, nullable=True),
    Column("name", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    UniqueConstraint("session_id", "seq", name="uq_message_seq"),
)

message_keys = Table(
    "message_keys",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("occurrence_key", Text, primary_key=True),  # never taken twice in a session
    Column("message_id", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

# The audit trail (remindkit.audit): one row per change, written in the change's own
# transaction. AUTOINCREMENT on SQLite so an id is never reused; readers tail by id.
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", BigInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("surface", Text, nullable=False),
    Column("session_id", Text, nullable=True),
    Column("reminder_id", Text, nullable=True),
    Column("occurrence_id", Integer, nullable=True),
    Column("detail", Text, nullable=True),  # JSON, bounded (audit.DETAIL_MAX)
    sqlite_autoincrement=True,
)
Index("ix_events_reminder", events.c.reminder_id, events.c.id)
Index("ix_events_session", events.c.session_id, events.c.id)

outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("channel", Text, nullable=False),  # telegram | webhook
    Column("key", Text, nullable=False),  # idempotency key: one reply, one row
    Column("route_key", Text, nullable=False),  # rows of one destination go out in id order
    Column("route", Text, nullable=False, server_default="{}"),  # JSON: where it goes
    Column("session_id", Text, nullable=True),
    Column("payload", Text, nullable=False),  # JSON: what is sent
    Column("state", Text, nullable=False, server_default="queued"),  # queued | sent | failed
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("last_error", Text, nullable=True),
    Column("owner", Text, nullable=True),  # the sender holding it ...
    Column("lease_until", BigInteger, nullable=True),  # ... until then
    Column("created_at", BigInteger, nullable=False),
    Column("sent_at", BigInteger, nullable=True),
    Column("remote_id", Text, nullable=True),  # e.g. Telegram's message_id
    UniqueConstraint("key", name="uq_outbox_key"),
)
Index("ix_outbox_due", outbox.c.channel, outbox.c.state, outbox.c.next_attempt_at)
Index("ix_outbox_route", outbox.c.route_key, outbox.c.state, outbox.c.id)
