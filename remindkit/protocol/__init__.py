"""What passes between remindkit and an agent: the ``<schedule-fired>`` framing
(and, with the agent side, ``<schedule>`` tags and tool calls). Pure functions."""

from .framing import escape_attr, fired_block, frame_fired, json_text

__all__ = ["escape_attr", "fired_block", "frame_fired", "json_text"]
