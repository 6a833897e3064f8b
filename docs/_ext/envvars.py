"""Every ``REMINDKIT_*`` environment variable: what it means, its default, who reads it.

The settings reference (docs/reference/settings.md) is made from :data:`VARIABLES`, and
tests/test_docs.py holds it to the code: every ``REMINDKIT_*`` name written in the
package, the tray, the scripts, the tests and the benches is listed here, and nothing
here is a name the code no longer reads. A default that the code holds as a value is
read from the code (a callable here), so the page cannot drift from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    meaning: str
    default: str | Callable[[], str] = "unset"

    def default_text(self) -> str:
        return self.default() if callable(self.default) else self.default


@dataclass(frozen=True)
class Group:
    title: str
    intro: str
    variables: tuple[Variable, ...]


def _settings(attr: str, fmt: str = "{}") -> Callable[[], str]:
    def read() -> str:
        from remindkit.settings import Settings

        value = Settings.__dataclass_fields__[attr].default
        return fmt.format(_number(value))

    return read


def _limit(attr: str, fmt: str = "{}") -> Callable[[], str]:
    def read() -> str:
        from remindkit.settings import Limits

        value = getattr(Limits(), attr)
        return "none" if value is None else fmt.format(_number(value))

    return read


def _model(attr: str, fmt: str = "{}") -> Callable[[], str]:
    def read() -> str:
        from remindkit.settings import ModelLimits

        return fmt.format(_number(getattr(ModelLimits(), attr)))

    return read


def _constant(module: str, name: str, fmt: str = "{}") -> Callable[[], str]:
    def read() -> str:
        import importlib

        return fmt.format(_number(getattr(importlib.import_module(module), name)))

    return read


def _number(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return value


def _alert(attr: str) -> Callable[[], str]:
    def read() -> str:
        from remindkit.alerts.config import AlertConfig

        return str(getattr(AlertConfig, attr))

    return read


def _players() -> str:
    from remindkit.alerts.config import default_players

    linux = ",".join(default_players("linux"))
    mac = ",".join(default_players("darwin"))
    return f"`{linux}` (macOS: `{mac}`)"


def _horizon() -> str:
    from remindkit.settings import Limits

    return f"{Limits().horizon_s // 86_400} (days)"


def _context() -> str:
    from remindkit.settings import DEFAULT_CONTEXT_TOKENS

    return f"what the server says, else {DEFAULT_CONTEXT_TOKENS}"


def _bytes() -> str:
    from remindkit.settings import ModelLimits

    return f"{ModelLimits().max_response_bytes // (1024 * 1024)} MiB"


VARIABLES: tuple[Group, ...] = (
    Group(
        "The store and the defaults of a reminder",
        "Read by every process through `remindkit.settings.Settings.from_env`.",
        (
            Variable(
                "REMINDKIT_HOME",
                "remindkit's data folder: the default SQLite store, the local API credential, "
                "status files, MCP session bindings",
                "the user data folder (`~/.local/share/remindkit`)",
            ),
            Variable(
                "REMINDKIT_DB",
                "SQLAlchemy URL of the store (`--db` wins); `postgresql+psycopg://user@host/db` "
                "for PostgreSQL",
                "`remindkit.db` in the home folder",
            ),
            Variable(
                "REMINDKIT_TZ",
                "IANA zone for reminders that name none (resolved once, when the reminder "
                "is made) and for quiet hours",
                "the machine's zone",
            ),
            Variable(
                "REMINDKIT_SESSION",
                "the session scope of the command line: `remind` makes reminders in it, every "
                "other command sees only it, and what reaches beyond it is `forbidden`; "
                "remindkit sets it for the agent commands it runs",
            ),
        ),
    ),
    Group(
        "Limits",
        "`0` or `none` turns a count limit off. The times take a plain number in their "
        "unit or a duration as the command line writes it (`5m`, `1h30m`, `1y`).",
        (
            Variable(
                "REMINDKIT_MAX_PER_SESSION",
                "active reminders per session",
                _limit("per_session"),
            ),
            Variable("REMINDKIT_MAX_TOTAL", "active reminders in the store", _limit("total")),
            Variable(
                "REMINDKIT_MAX_PER_PROJECT",
                "active reminders per project; `remindkit api` holds its projects to 200 "
                "unless set (set it for every surface to count)",
                "none (200 under `remindkit api`)",
            ),
            Variable(
                "REMINDKIT_MIN_PERIOD",
                "shortest repeat period (seconds)",
                _limit("min_period_s"),
            ),
            Variable(
                "REMINDKIT_HORIZON_DAYS",
                "how far ahead a fire may be",
                _horizon,
            ),
            Variable(
                "REMINDKIT_MAX_TEXT",
                "longest reminder text (characters)",
                _limit("text_max"),
            ),
        ),
    ),
    Group(
        "Engines",
        "Read by each engine from its own environment.",
        (
            Variable("REMINDKIT_LEASE", "claim lease (seconds)", _settings("lease_s")),
            Variable(
                "REMINDKIT_WAIT_CAP",
                "longest engine sleep (seconds): what a suspend or a clock jump can cost",
                _settings("wait_cap_s"),
            ),
            Variable(
                "REMINDKIT_SQLITE_SYNC",
                "SQLite's `synchronous`: `FULL` or `NORMAL`",
                _settings("sqlite_synchronous"),
            ),
            Variable(
                "REMINDKIT_BUSY_TIMEOUT_MS",
                "how long SQLite waits for its write lock (ms)",
                _settings("busy_timeout_ms"),
            ),
            Variable(
                "REMINDKIT_CATCHUP_MAX",
                "most occurrences one claim may fire; a row asking for more is quarantined",
                _settings("catchup_max"),
            ),
            Variable(
                "REMINDKIT_BREAKER_AFTER",
                "failed turns in a row after which a session's fallback is tried first",
                _settings("breaker_after"),
            ),
            Variable(
                "REMINDKIT_QUIET_GC",
                "`0`: leave Python's garbage collector to the interpreter (by default an engine "
                "collects and freezes when no fire is near)",
                "1",
            ),
            Variable(
                "REMINDKIT_HANDOFF",
                "`0`: a command runs in its own process instead of being handed to the engine "
                "that serves the store (in an engine's environment: that engine takes none)",
                "1",
            ),
            Variable(
                "REMINDKIT_ADAPTERS",
                "extra session adapters loaded into engines, `module:factory`, comma-separated",
            ),
            Variable(
                "REMINDKIT_FAILPOINTS",
                "fault injection for the reliability tests, e.g. "
                "`after_claim_commit=kill@3,during_delivery=sleep:5`",
            ),
        ),
    ),
    Group(
        "What an engine runs and where it sends",
        "An engine's own policy, read from its environment, never from the shared store "
        "(see [Security and trust](../operations/security.md)).",
        (
            Variable(
                "REMINDKIT_ENGINE_ADAPTERS",
                "adapters this engine runs, comma-separated (`python,openai`)",
                "all",
            ),
            Variable(
                "REMINDKIT_ENGINE_COMMANDS",
                "programs a `command` session (or an `mcp` session's resume command) may run, "
                "resolved on `PATH`",
                "any",
            ),
            Variable(
                "REMINDKIT_API_KEY_ENVS",
                "variables an `openai` session may read its key from, besides `OPENAI_API_KEY`",
            ),
            Variable(
                "REMINDKIT_WEBHOOK_HOSTS",
                "where webhooks may go: names, wildcards (`*.example.com`, `*`), addresses "
                "and networks (`127.0.0.1`, `10.0.0.0/8`)",
                "`*` (any name, at a public address only)",
            ),
            Variable(
                "REMINDKIT_WEBHOOK_SECRET",
                "the `whsec_…` secret a `webhook` session signs with (the default `--secret-env`)",
            ),
            Variable(
                "REMINDKIT_WEBHOOK_SECRET_ENVS",
                "other variables a `webhook` session may sign with",
            ),
            Variable(
                "REMINDKIT_WEBHOOK_TIMEOUT",
                "one webhook try's deadline, every socket operation included (seconds)",
                _constant("remindkit.sessions.webhook", "TIMEOUT_S"),
            ),
            Variable(
                "REMINDKIT_WEBHOOK_RETRY_WINDOW",
                "how long a webhook delivery is retried before it is `failed` (seconds)",
                _constant("remindkit.sessions.webhook", "DEFAULT_WINDOW_S"),
            ),
        ),
    ),
    Group(
        "What a `command` session's process gets",
        "Set by the engine in the environment of the agent command it runs.",
        (
            Variable("REMINDKIT_REMINDER_IDS", "the ids of the reminders in this turn", "set"),
            Variable(
                "REMINDKIT_OCCURRENCE_KEYS",
                "the occurrence keys of this turn (the idempotency keys), comma-separated",
                "set",
            ),
            Variable(
                "REMINDKIT_API_URL",
                "the HTTP API's address (set by `remindkit api` for the commands its engine "
                "runs; read by the SDKs first)",
            ),
            Variable(
                "REMINDKIT_TOKEN",
                "a session token for the HTTP API (set by `remindkit api` for its engine's "
                "commands; the SDKs prefer it to the local credential)",
            ),
        ),
    ),
    Group(
        "Alarm, speech and notifications",
        "Defaults: `remindkit alerts …` keeps mute, quiet hours, voice and rate in the store, "
        "and the store wins.",
        (
            Variable("REMINDKIT_MUTE", "`1`: no alarm or speech (notifications still show)", "0"),
            Variable(
                "REMINDKIT_QUIET_HOURS",
                "daily quiet hours in local time, `22:00-07:00`",
                "off",
            ),
            Variable("REMINDKIT_VOICE", "voice of `announce` (id, name or language)"),
            Variable("REMINDKIT_SPEECH_RATE", "speech rate (words per minute)"),
            Variable("REMINDKIT_ALARM", "WAV file played as the alarm", "the bundled `alarm.wav`"),
            Variable(
                "REMINDKIT_AUDIO",
                "players to try, in order (`simpleaudio,aplay`)",
                _players,
            ),
            Variable("REMINDKIT_NOTIFY", "`0`: no desktop notifications", "1"),
            Variable(
                "REMINDKIT_SNOOZE",
                "the notification's Snooze duration",
                _alert("snooze"),
            ),
            Variable(
                "REMINDKIT_TRAY_STATE",
                "a file the tray writes what it shows to (tooltip, menu) after each redraw, "
                "as JSON: for tests and bug reports",
            ),
        ),
    ),
    Group(
        "`openai` sessions' model servers",
        "Bounds on what a model server can make remindkit do (`remindkit.settings.ModelLimits`).",
        (
            Variable("REMINDKIT_MODEL_CONTEXT", "context size in tokens", _context),
            Variable(
                "REMINDKIT_MODEL_MAX_TOKENS",
                "a reply's `max_tokens` (at most a quarter of the context)",
                _model("max_tokens"),
            ),
            Variable("REMINDKIT_MODEL_MAX_BYTES", "largest response read", _bytes),
            Variable(
                "REMINDKIT_MODEL_MAX_MESSAGE",
                "longest stored reply or tool result (characters)",
                _model("max_message_chars"),
            ),
            Variable(
                "REMINDKIT_MODEL_MAX_TOOL_CALLS",
                "tool calls carried out per completion",
                _model("max_tool_calls"),
            ),
        ),
    ),
    Group(
        "`remindkit api`, `remindkit mcp`, `remindkit telegram`",
        "",
        (
            Variable(
                "REMINDKIT_HEAD_TIMEOUT",
                "a connection's request head must arrive within this (seconds)",
                _settings("head_timeout_s"),
            ),
            Variable(
                "REMINDKIT_BODY_TIMEOUT",
                "a request's body must arrive within this of its head (seconds)",
                _settings("body_timeout_s"),
            ),
            Variable(
                "REMINDKIT_MCP_IDLE",
                "an MCP session at `/mcp` with no request this long is ended (seconds)",
                _settings("mcp_idle_s"),
            ),
            Variable(
                "REMINDKIT_MCP_NAME",
                "the name Claude Code knows remindkit's MCP server by (the channel check)",
                "`remindkit`",
            ),
            Variable(
                "REMINDKIT_BIN",
                "the `remindkit` executable the Claude Code plugin's launcher runs",
                "the plugin's Python environment, else `remindkit` on `PATH`",
            ),
            Variable(
                "REMINDKIT_TG_MAX_MESSAGES",
                "transcript messages after which a Telegram thread's session expires",
                _constant("remindkit.channels.telegram.threads", "DEFAULT_MAX_MESSAGES"),
            ),
            Variable(
                "REMINDKIT_TG_MAX_AGE",
                "age after which a Telegram thread's session expires (seconds)",
                _constant("remindkit.channels.telegram.threads", "DEFAULT_MAX_AGE_S"),
            ),
        ),
    ),
    Group(
        "Tests, benches and set-up",
        "Read by `scripts/`, `tests/` and `bench/` only.",
        (
            Variable(
                "REMINDKIT_SKIP_APT",
                "`1`: `scripts/setup` skips the Debian packages",
                "0",
            ),
            Variable(
                "REMINDKIT_TEST_PG",
                "the PostgreSQL server of the tests",
                "`postgresql+psycopg://postgres@127.0.0.1:5432/test`",
            ),
            Variable(
                "REMINDKIT_REQUIRE_PG",
                "`1`: PostgreSQL tests fail rather than skip without the server",
                "1 under `scripts/test`",
            ),
            Variable(
                "REMINDKIT_REQUIRE_CLIENTS",
                "`1`: the MCP client frameworks' and agent CLIs' tests fail rather than skip",
                "1 under `scripts/test`",
            ),
            Variable(
                "REMINDKIT_REQUIRE_USERS",
                "`1`: the attacks made by a second Unix user fail rather than skip (needs root)",
                "1 under `scripts/test`",
            ),
            Variable(
                "REMINDKIT_REQUIRE_MODEL",
                "`1`: the real-model tests fail rather than skip",
                "1 under `scripts/test --model`",
            ),
            Variable(
                "REMINDKIT_TEST_CHROMIUM",
                "the Chromium the browser tests drive",
                "/usr/bin/chromium",
            ),
            Variable(
                "REMINDKIT_SOAK_CHUNK",
                "inputs per hypothesis run of the soak fuzzing",
                "10000",
            ),
            Variable(
                "REMINDKIT_DEMO_DIR",
                "the notebooks' throwaway store folder (set by the notebook tests)",
            ),
            Variable(
                "REMINDKIT_CHAT_SESSION",
                "the session the TypeScript client's chat test uses",
            ),
            Variable(
                "REMINDKIT_OPENAPI",
                "the OpenAPI document `npm run types` makes the TypeScript client's types from "
                "(clients/typescript)",
                "`http://127.0.0.1:8765/openapi.json`",
            ),
            Variable(
                "REMINDKIT_BENCH_PG",
                "the PostgreSQL server of the benches",
                "`postgresql+psycopg://postgres@127.0.0.1:5432/test`",
            ),
            Variable(
                "REMINDKIT_BENCH_DIR",
                "where `bench/run.py` makes its temporary stores",
                "the system's temporary folder",
            ),
            Variable(
                "REMINDKIT_BENCH_REPEAT",
                "runs of each side of `bench/run.py`'s lateness rows",
                "2",
            ),
        ),
    ),
)

# Written in the code with the prefix but not environment variables.
NOT_VARIABLES = frozenset({"REMINDKIT_ENV"})  # mcp/hosts/common.py: a tuple of names


def names() -> set[str]:
    return {v.name for group in VARIABLES for v in group.variables}
