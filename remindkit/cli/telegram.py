"""``remindkit telegram``: run the Telegram bot (and an engine) until SIGINT/SIGTERM.

The agent of every thread is chosen here, as ``session add`` takes it:
``--command ARGV`` or ``--openai --base-url URL --model NAME``. The token is read
from the environment variable ``--token-env`` names (default
``TELEGRAM_BOT_TOKEN``) and is never stored or logged. Only chats given with
``--allow CHAT_ID`` get an agent, or every chat with ``--allow-all``.
"""

from __future__ import annotations

import argparse
import os
import re
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import InvalidInput

if TYPE_CHECKING:
    from ..wiring import Graph

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_CHAT_ID = re.compile(r"-?[0-9]{1,20}", re.ASCII)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    tg = sub.add_parser(
        "telegram", parents=[common], help="a Telegram bot: each chat or topic is an agent session"
    )
    tg.add_argument(
        "--token-env",
        default="TELEGRAM_BOT_TOKEN",
        metavar="VAR",
        help="environment variable holding the bot token (default TELEGRAM_BOT_TOKEN)",
    )
    tg.add_argument(
        "--allow",
        action="extend",
        nargs="+",
        default=[],
        metavar="CHAT_ID",
        help="chats that get an agent (repeatable)",
    )
    tg.add_argument("--allow-all", action="store_true", help="every chat gets an agent")
    tg.add_argument(
        "--command",
        dest="command_argv",
        metavar="ARGV",
        help="the agent: run this once per turn ({session} and {message} are replaced; stdin has the message)",
    )
    tg.add_argument(
        "--openai",
        action="store_true",
        help="the agent: an OpenAI-compatible chat (needs --base-url, --model)",
    )
    tg.add_argument("--base-url", help="with --openai")
    tg.add_argument("--model", help="with --openai")
    tg.add_argument("--api-key-env", metavar="VAR", help="with --openai (default OPENAI_API_KEY)")
    tg.add_argument("--system", help="with --openai: system prompt")
    tg.add_argument("--timeout", type=float, help="seconds one agent turn may take")
    tg.add_argument(
        "--api-url",
        metavar="URL",
        help="Bot API base URL, the token appended (default https://api.telegram.org/bot); "
        "for a local Bot API server",
    )
    tg.add_argument(
        "--poll-timeout", type=int, default=30, help="getUpdates long-polling seconds (default 30)"
    )
    tg.add_argument(
        "--no-engine", action="store_true", help="do not run an engine here (another process fires)"
    )
    tg.add_argument("-v", "--verbose", action="store_true")
    tg.set_defaults(func=run_command)


def agent_config(args: argparse.Namespace) -> dict[str, Any]:
    if bool(args.command_argv) == bool(args.openai):
        raise InvalidInput(
            "give the agent: --command ARGV or --openai --base-url URL --model NAME",
            code="invalid_argument",
        )
    config: dict[str, Any]
    if args.command_argv:
        try:
            from ..sessions.command import parse_argv

            config = {"agent": "command", "argv": parse_argv(args.command_argv)}
        except ValueError as exc:
            raise InvalidInput(f"--command: {exc}", code="invalid_command") from None
    else:
        if (
            not args.base_url
            or not args.model
            or not args.base_url.startswith(("http://", "https://"))
        ):
            raise InvalidInput(
                "--openai needs --base-url (an http(s) URL) and --model", code="invalid_argument"
            )
        config = {"agent": "openai", "base_url": args.base_url, "model": args.model}
        if args.api_key_env:
            config["api_key_env"] = args.api_key_env
        if args.system is not None:
            config["system"] = args.system
    if args.timeout is not None:
        if not args.timeout > 0:
            raise InvalidInput(
                "--timeout must be a positive number of seconds", code="invalid_argument"
            )
        config["timeout"] = args.timeout
    return config


def allowlist(args: argparse.Namespace) -> set[int] | None:
    if args.allow_all and args.allow:
        raise InvalidInput(
            "give --allow CHAT_ID … or --allow-all, not both", code="invalid_argument"
        )
    if args.allow_all:
        return None
    if not args.allow:
        raise InvalidInput(
            "no chat would get an agent: give --allow CHAT_ID … or --allow-all",
            code="invalid_argument",
        )
    bad = [a for a in args.allow if not _CHAT_ID.fullmatch(a)]
    if bad:
        raise InvalidInput(
            f"--allow {bad[0]!r} is not a chat id (an integer)", code="invalid_argument"
        )
    return {int(a) for a in args.allow}


def run_command(cx: Any) -> int:
    from .scope import refuse_in_scope

    refuse_in_scope("telegram")  # it defines sessions (their agent is code): the local user's only
    return run(cx.args, cx.graph, cx.out)


def run(args: argparse.Namespace, graph: Graph, out: TextIO) -> int:
    import asyncio  # the bot loads these only when it runs: `remindkit status --line` stays quick
    import logging
    import signal

    config = agent_config(args)
    allow = allowlist(args)
    if not _ENV_NAME.fullmatch(args.token_env):
        raise InvalidInput(
            f"--token-env {args.token_env!r} is not an environment variable name",
            code="invalid_argument",
        )
    token = os.environ.get(args.token_env, "")
    if not token:
        raise InvalidInput(
            f"the bot token variable {args.token_env} is not set", code="telegram_token_missing"
        )
    if args.api_url is not None and not args.api_url.startswith(("http://", "https://")):
        raise InvalidInput(
            f"--api-url {args.api_url!r} is not an http(s) URL", code="invalid_argument"
        )
    try:
        from ..channels.telegram.bot import TelegramBridge, make_bot
    except ImportError:
        raise InvalidInput(
            "remindkit telegram needs python-telegram-bot: pip install 'remindkit[telegram]'",
            code="telegram_not_installed",
        ) from None
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpcore", "telegram"):  # request lines carry the token in their URL
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from ..audit import Surface

    api = graph.for_surface(Surface.TELEGRAM).api  # ✕, /cancel, expiry: the chat's, not the CLI's
    engine = None if args.no_engine else graph.engine(role="telegram", can_alert=False)
    bridge = TelegramBridge(
        api,
        make_bot(token, args.api_url),
        agent=config,
        allow=allow,
        poll_timeout=args.poll_timeout,
    )
    del token
    if engine is not None:
        routed = engine.adapters.get("telegram")
        routed = getattr(routed, "inner", routed)  # the engine's policy guard wraps every adapter
        if routed is not None and hasattr(routed, "working"):
            routed.working = bridge.typing_while  # a fired turn in a thread shows typing there

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await bridge.run(stop, on_ready=engine.start if engine is not None else None)

    out.write(
        f"remindkit telegram: on {api.store.url}; allow {'all' if allow is None else sorted(allow)}; "
        f"agent {config['agent']}; stop with Ctrl-C\n"
    )
    out.flush()
    try:
        asyncio.run(main())
    finally:
        if engine is not None:
            engine.stop()
    out.write("remindkit telegram: stopped\n")
    return 0
