"""Every error code of remindkit, with what it means and where it comes from.

:class:`ErrorCode` is the registry the error reference is made from (``python -m
remindkit.errors``, :func:`remindkit.errors.reference`): the codes of the errors in
:mod:`remindkit.errors`, the HTTP server's own, the tools', the tags' and
``set_callback``'s. A code is written in the package as its string or as a member (the
two compare equal); tests/test_errors.py finds each one written and holds it to this
registry. Its own module: the command line imports :mod:`remindkit.errors` on every
start, and this enum costs milliseconds to make.
"""

from __future__ import annotations

from ._compat import StrEnum

# Where a code comes from (the reference's last column).
ALL = "every surface"
SCHEDULES = "every surface (schedules)"
HTTP = "HTTP API"
TOOLS = "tools"
TAGS = "tags"
CALLBACK = "set_callback"
CLI = "command line"
ENGINE = "engine (recorded, not a refusal)"


class ErrorCode(StrEnum):
    """Every error code of remindkit: a ``str`` (it compares equal to, and prints as,
    the code), with ``meaning`` and ``where`` for the reference."""

    meaning: str
    where: str

    def __new__(cls, value: str, meaning: str = "", where: str = "") -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        member.where = where
        return member

    # -- schedules (InvalidSchedule) --------------------------------------------------------
    INVALID_SCHEDULE = "invalid_schedule", "a schedule of an unknown kind", SCHEDULES
    INVALID_DURATION = "invalid_duration", "a delay or interval that is not a duration", SCHEDULES
    INVALID_TIME = "invalid_time", "a time that is not RFC 3339 or a local date-time", SCHEDULES
    TIME_NOT_FUTURE = "time_not_future", "a time that is not in the future", SCHEDULES
    NONEXISTENT_LOCAL_TIME = (
        "nonexistent_local_time",
        "a local time in a DST gap (the clocks skip it)",
        SCHEDULES,
    )
    UNKNOWN_TIME_ZONE = "unknown_time_zone", "a time zone that is not an IANA name", SCHEDULES
    INVALID_CRON = "invalid_cron", "a cron expression that cannot be read", SCHEDULES
    INTERVAL_TOO_SHORT = (
        "interval_too_short",
        "a repeat period under the minimum (60 s by default)",
        SCHEDULES,
    )
    HORIZON_EXCEEDED = "horizon_exceeded", "a fire past the horizon (366 days)", SCHEDULES
    CONFLICTING_SCHEDULE = (
        "conflicting_schedule",
        "more than one of in/after, at, every, cron",
        SCHEDULES,
    )
    MISSING_SCHEDULE = "missing_schedule", "none of in/after, at, every, cron", SCHEDULES
    INVALID_REPEAT = "invalid_repeat", "a repeat count that is not a whole number >= 1", SCHEDULES
    UNTIL_NOT_AFTER_START = (
        "until_not_after_start",
        "an end that is not after the first fire",
        SCHEDULES,
    )
    NO_FUTURE_FIRE = "no_future_fire", "a schedule that never fires again", SCHEDULES
    MISSING_TIME_ZONE = (
        "missing_time_zone",
        "a local at without time_zone (the model names the zone)",
        TOOLS,
    )
    # -- input (InvalidInput) ---------------------------------------------------------------
    INVALID_ARGUMENT = (
        "invalid_argument",
        "an argument missing, of the wrong type or not allowed",
        ALL,
    )
    EMPTY_TEXT = "empty_text", "a reminder with no text", ALL
    TEXT_TOO_LONG = "text_too_long", "a reminder text over the limit", ALL
    LABEL_TOO_LONG = "label_too_long", "a label over the limit", ALL
    INVALID_LABEL = "invalid_label", "a label that is not a line of printable text", ALL
    ANNOUNCE_TOO_LONG = "announce_too_long", "an announce text over the limit", ALL
    INVALID_SESSION = (
        "invalid_session",
        "a session id that is empty, over 200 characters or has control characters",
        ALL,
    )
    INVALID_PROJECT = "invalid_project", "a project name that is not 1-64 of A-Z a-z 0-9 _ . -", ALL
    INVALID_ON_BUSY = "invalid_on_busy", "on_busy not wait, rebase or skip", ALL
    INVALID_URGENCY = "invalid_urgency", "urgency not low, normal or critical", ALL
    INVALID_MISFIRE = "invalid_misfire", "misfire not latest, skip or all", ALL
    INVALID_IMPORT = "invalid_import", "an import line that cannot be taken (with its number)", CLI
    INVALID_STATE = "invalid_state", "an import line's state that is not a reminder state", CLI
    INVALID_QUIET_HOURS = "invalid_quiet_hours", "quiet hours that are not HH:MM-HH:MM", ALL
    INVALID_COMMAND = (
        "invalid_command",
        "a session's command that cannot be split into an argv",
        CLI,
    )
    INVALID_SETTING = "invalid_setting", "an environment setting that cannot be read", ALL
    INVALID_STORE_URL = (
        "invalid_store_url",
        "a --db / REMINDKIT_DB that is not a SQLite or PostgreSQL URL",
        CLI,
    )
    KEY_ENV_NOT_ALLOWED = "key_env_not_allowed", "an api_key_env not on the allowlist", CLI
    SECRET_ENV_NOT_ALLOWED = (
        "secret_env_not_allowed",
        "a webhook's secret_env not on the allowlist",
        CLI,
    )
    TELEGRAM_TOKEN_MISSING = (
        "telegram_token_missing",
        "remindkit telegram's --token-env variable is not set",
        CLI,
    )
    TELEGRAM_NOT_INSTALLED = "telegram_not_installed", "the telegram extra is missing", CLI
    MISSING_DEPENDENCY = "missing_dependency", "a command needs an extra that is missing", CLI
    UNSAFE_PATH = (
        "unsafe_path",
        "an mcp install-… that would write through a link or out of its folder",
        CLI,
    )
    TOKENS_REQUIRED = (
        "tokens_required",
        "remindkit api on a non-loopback address with no token",
        CLI,
    )
    # -- limits (LimitExceeded) -------------------------------------------------------------
    TOO_MANY_REMINDERS = (
        "too_many_reminders",
        "the session's, project's or store's limit of active reminders",
        ALL,
    )
    TOO_MANY_STREAMS = "too_many_streams", "event streams open past the limit", HTTP
    # -- lookups (NotFound) -----------------------------------------------------------------
    NOT_FOUND = "not_found", "no reminder (or route) by that id", ALL
    SESSION_NOT_FOUND = "session_not_found", "no session by that id", ALL
    PROJECT_NOT_FOUND = "project_not_found", "no project by that name", HTTP
    # -- state (Conflict) -------------------------------------------------------------------
    CONFLICT = "conflict", "another process changed it at the same moment: retry", ALL
    NOT_ACTIVE = "not_active", "the reminder is not in a state that allows it", ALL
    ALREADY_EXISTS = "already_exists", "it exists already", ALL
    SESSION_DELETED = "session_deleted", "the session was deleted", ALL
    SESSION_TAKEN = (
        "session_taken",
        "a session of another kind or project asked for as one's own",
        ALL,
    )
    SESSION_BUSY = "session_busy", "a turn of the session runs already", HTTP
    NO_AGENT = "no_agent", "a message to a session with no adapter that runs a typed turn", HTTP
    AGENT_NOT_ALLOWED = "agent_not_allowed", "the engine's policy does not run this session", HTTP
    TOO_MANY_TURNS = "too_many_turns", "the server runs as many turns as it may", HTTP
    # -- credentials (Unauthorized, Forbidden) ----------------------------------------------
    UNAUTHORIZED = "unauthorized", "no bearer token, or one that is not known", HTTP
    LOGIN_EXPIRED = "login_expired", "a login URL used already or expired", HTTP
    FORBIDDEN = "forbidden", "outside the session scope or the token's project", ALL
    READ_ONLY = "read_only", "a read-only token that writes", HTTP
    FEATURE_DISABLED = "feature_disabled", "the project's reminders feature is off", HTTP
    HOST_NOT_ALLOWED = "host_not_allowed", "a Host header the server does not answer to", HTTP
    ORIGIN_NOT_ALLOWED = "origin_not_allowed", "a browser's change from another Origin", HTTP
    # -- the store (StoreError, PlanRefused) ------------------------------------------------
    STORE_UNAVAILABLE = "store_unavailable", "the store cannot be reached now: retry", ALL
    SCHEMA_TOO_NEW = "schema_too_new", "the store was written by a newer remindkit", ALL
    UNREADABLE_ROW = "unreadable_row", "a stored reminder that cannot be read (quarantined)", ALL
    PLAN_REFUSED = (
        "plan_refused",
        "a stored reminder past the engine's own bounds (quarantined)",
        ENGINE,
    )
    # -- the HTTP server itself ------------------------------------------------------------
    METHOD_NOT_ALLOWED = "method_not_allowed", "a method the route does not take", HTTP
    BODY_TOO_LARGE = "body_too_large", "a request body over the limit", HTTP
    REQUEST_TIMEOUT = "request_timeout", "a request body that came too slowly", HTTP
    TOO_MANY_CONNECTIONS = "too_many_connections", "the server is full: try again", HTTP
    TOO_MANY_SESSIONS = (
        "too_many_sessions",
        "a token with as many MCP sessions open as it may",
        HTTP,
    )
    TOO_MANY_REQUESTS = "too_many_requests", "as many MCP requests open as the server takes", HTTP
    TURN_FAILED = "turn_failed", "a typed turn that failed", HTTP
    # -- tools ------------------------------------------------------------------------------
    UNKNOWN_TOOL = "unknown_tool", "a tool remindkit does not have", TOOLS
    SCHEDULE_NOT_FOUND = "schedule_not_found", "no schedule by that id or label", f"{TOOLS}, {TAGS}"
    PERSISTENCE_UNCERTAIN = (
        "persistence_uncertain",
        "the store did not confirm the change in time: list before retrying",
        TOOLS,
    )
    TOO_MANY_TOOL_CALLS = (
        "too_many_tool_calls",
        "more tool calls in one completion than an openai session runs",
        TOOLS,
    )
    ARGUMENTS_TOO_LONG = (
        "arguments_too_long",
        "a tool call's arguments over an openai session's bound",
        TOOLS,
    )
    # -- set_callback -----------------------------------------------------------------------
    INVALID_DELAY = "invalid_delay", "a delay that is not 1-3600 seconds", CALLBACK
    INVALID_ACTION = "invalid_action", "an action that is not set, list or cancel", CALLBACK
    CALLBACK_SLOTS_FULL = "callback_slots_full", "all 8 slots hold a callback", CALLBACK
    CALLBACK_OUT_OF_RANGE = "callback_out_of_range", "a slot number that is not 0-7", CALLBACK
    CALLBACK_NOT_ACTIVE = "callback_not_active", "no active callback in that slot", CALLBACK
    # -- tags -------------------------------------------------------------------------------
    MALFORMED_TAG = "malformed_tag", "a tag that cannot be read", TAGS
    UNCLOSED_TAG = "unclosed_tag", "a <schedule> with no </schedule>", TAGS
    NESTED_TAG = "nested_tag", "a tag inside a tag", TAGS
    MISSING_LABEL = "missing_label", "a tag without its label", TAGS
    UNKNOWN_ATTRIBUTE = "unknown_attribute", "an attribute the tag does not take", TAGS
    DUPLICATE_ATTRIBUTE = "duplicate_attribute", "an attribute given twice", TAGS
    INVALID_ATTRIBUTE = "invalid_attribute", "an attribute's value that is not allowed", TAGS
    ATTRIBUTE_TOO_LONG = "attribute_too_long", "an attribute over its length", TAGS
    TAG_TOO_LONG = "tag_too_long", "a tag's attributes over their length", TAGS
    TOO_MANY_TAGS = "too_many_tags", "more tags in one reply than are carried out", TAGS
    ECHOED_REMINDER_TAG = (
        "echoed_reminder_tag",
        "a tag inside the reminder texts of the fired turn answered (not carried out)",
        TAGS,
    )
    # -- model and agent turns (ModelError), the tray ---------------------------------------
    MODEL_ERROR = "model_error", "a model turn failed", ENGINE
    MODEL_UNREACHABLE = "model_unreachable", "the model server cannot be reached", ENGINE
    MODEL_HTTP_ERROR = "model_http_error", "the model server answered with an error", ENGINE
    MODEL_BAD_RESPONSE = "model_bad_response", "the model server's answer cannot be read", ENGINE
    MODEL_UNAVAILABLE = (
        "model_unavailable",
        "a 5xx or 429 from the model server: tried again",
        ENGINE,
    )
    MODEL_CONTEXT_OVERFLOW = (
        "model_context_overflow",
        "the request did not fit the model's context: sent again, shorter",
        ENGINE,
    )
    MODEL_RESPONSE_TOO_LARGE = (
        "model_response_too_large",
        "a model's answer over the byte cap",
        ENGINE,
    )
    AGENT_FAILED = "agent_failed", "a Telegram thread's agent turn failed; the chat is told", ENGINE
    TRAY_UNAVAILABLE = "tray_unavailable", "no tray toolkit or no display", CLI
    # -- the base ---------------------------------------------------------------------------
    ERROR = "error", "RemindkitError's default; every error raised names its own", ENGINE


__all__ = ["ErrorCode"]
