"""Alerts tests use the real sound device stand-ins and the notification bus."""

from ..desktop_fixtures import (
    Capture,
    alsa_capture,
    alsa_no_device,
    alsa_paced,
    notification_bus,
    wav_frames,
)

__all__ = [
    "Capture",
    "alsa_capture",
    "alsa_no_device",
    "alsa_paced",
    "notification_bus",
    "wav_frames",
]
