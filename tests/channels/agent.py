"""A command agent for the Telegram tests: reads the message on stdin, logs the
call to the file named by its first argument, and answers. "remind me in Ns to X" sets a reminder with a
<schedule> tag; a <schedule-fired> message is answered with the reminder's label."""

import os
import re
import sys
import time

message = sys.stdin.read()
with open(sys.argv[1], "a") as log:
    kind = "fired" if "<schedule-fired" in message else "chat"
    log.write(f"{os.environ.get('REMINDKIT_SESSION')}\t{kind}\t{' '.join(message.split())[:120]}\n")
if "<schedule-fired" in message:
    time.sleep(0.5)  # long enough for a typing action to show
    labels = re.findall(r'label="([^"]*)"', message)
    print(f"Time's up: {', '.join(labels)}!")
    sys.exit(0)
asked = re.search(r"remind me in (\d+)s to (\w+)", message)
if asked:
    print(
        f'Sure, I will remind you. <schedule label="{asked.group(2)}" delay="{asked.group(1)}s">'
        f"{asked.group(2)}</schedule>"
    )
elif "long please" in message:
    print("\n".join(f"line {i:04d} " + "x" * 60 for i in range(120)))
elif "fail please" in message:
    sys.exit(3)
else:
    print(f"You said: {message.strip()[-200:]}")
