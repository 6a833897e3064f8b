"""The desktop tray app: ``remindkit tray`` / ``remindkit-tray``.

A pystray icon (a bell with a badge of the active count) whose tooltip counts
down to the next reminder and whose menu lists the reminders with snooze and
cancel, pause all, mute, stop sound and the last fires. It runs an engine that
is the preferred alerter: while it runs, other engines leave alarms and speech
to it. Modules: ``icon`` (drawing), ``view`` (what to show, pure), ``menu``
(the pystray menu), ``backend`` (choosing and inspecting the toolkit), ``app``.
"""
