"""The agent side: carrying out tags and tool calls for a session, and running
turns whose transcript remindkit keeps."""

from .actions import TagOutcome, execute_tags, feedback_errors, run_reply_tags
from .tools import ToolContext, ToolResult, handle_tool_call

__all__ = [
    "TagOutcome",
    "ToolContext",
    "ToolResult",
    "execute_tags",
    "feedback_errors",
    "handle_tool_call",
    "run_reply_tags",
]
