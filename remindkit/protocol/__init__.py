"""What passes between remindkit and an agent, as pure functions: the
``<schedule>`` / ``<cancel-schedule>`` tags of a reply (``tags``), what a person
sees of a conversation (``display``), the hidden ``<schedule-fired>`` and
``<schedule-feedback>`` messages (``framing``) and the tool definitions (``tools``)."""

from .display import (
    fired_marker,
    is_hidden_user_message,
    strip_assistant_display,
    strip_user_display_tags,
)
from .framing import escape_attr, fired_block, frame_feedback, frame_fired, json_text
from .tags import CancelTag, ParsedTags, ScheduleTag, TagError, parse_tags, strip_tags
from .tools import TOOL_NAMES, anthropic_tools, openai_tools, tool_specs

__all__ = [
    "TOOL_NAMES",
    "CancelTag",
    "ParsedTags",
    "ScheduleTag",
    "TagError",
    "anthropic_tools",
    "escape_attr",
    "fired_block",
    "fired_marker",
    "frame_feedback",
    "frame_fired",
    "is_hidden_user_message",
    "json_text",
    "openai_tools",
    "parse_tags",
    "strip_assistant_display",
    "strip_tags",
    "strip_user_display_tags",
    "tool_specs",
]
