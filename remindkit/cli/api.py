"""``remindkit api``, ``remindkit token create|ls|rm`` and ``remindkit projects``."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from ..clock import format_utc, from_us, to_us
from ..errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from ..reminders import Reminders
    from ..wiring import Graph


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    a = sub.add_parser(
        "api", parents=[common], help="the HTTP API, its event stream and web page (with an engine)"
    )
    a.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (anything but loopback needs tokens)",
    )
    a.add_argument(
        "--port", type=int, default=8765, help="port (0: any free one, printed at start)"
    )
    a.add_argument("--no-alerts", action="store_true", help="never play alarms or speech here")
    a.add_argument("--no-engine", action="store_true", help="serve only; another process fires")
    a.add_argument("-v", "--verbose", action="store_true")
    a.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name this server answers to (Host), e.g. behind a proxy",
    )
    a.set_defaults(func=lambda cx: _local(cx, "api", run_api_command, graph=True))
    aa = a.add_subparsers(dest="api_command", metavar="ACTION")
    o = aa.add_parser(
        "open", parents=[common], help="log a browser in to the running server (one-time URL)"
    )
    o.add_argument("--print", action="store_true", help="print the URL, do not open a browser")
    o.add_argument("--url", help="the server to log in to (default: the newest running one)")
    o.add_argument("--project", default="default")
    o.add_argument("--session", help="the session the page shows")
    o.set_defaults(func=lambda cx: _local(cx, "api", run_api_open))
    r = aa.add_parser(
        "reset",
        parents=[common],
        help="a new local credential: clients and browsers with the old one are refused",
    )
    r.set_defaults(func=lambda cx: _local(cx, "api", run_api_reset))

    t = sub.add_parser("token", parents=[common], help="bearer tokens of the HTTP API")
    ts = t.add_subparsers(dest="token_command", metavar="ACTION")
    c = ts.add_parser(
        "create", parents=[common], help="make a token and print it once (only its hash is kept)"
    )
    c.add_argument("--project", help="the project it acts on (created if new)")
    c.add_argument("--session", help="only this session of the project")
    c.add_argument("--admin", action="store_true", help="every project (instead of --project)")
    c.add_argument("--read-only", action="store_true", help="reads only")
    ts.add_parser("ls", parents=[common], help="list tokens (never the tokens themselves)")
    rm = ts.add_parser("rm", parents=[common], help="revoke a token by its id")
    rm.add_argument("id")
    t.set_defaults(func=lambda cx: _local(cx, "token", run_token))

    p = sub.add_parser(
        "projects", parents=[common], help="projects (namespaces of sessions) and their features"
    )
    ps = p.add_subparsers(dest="projects_command", metavar="ACTION")
    ps.add_parser("ls", parents=[common], help="list projects and their features")
    pc = ps.add_parser("create", parents=[common], help="create a project (features on)")
    pc.add_argument("name")
    f = ps.add_parser("features", parents=[common], help="turn a project's feature on or off")
    f.add_argument("action", choices=["enable", "disable"])
    f.add_argument("feature", choices=["reminders"])
    f.add_argument("--project", default="default")
    p.set_defaults(func=lambda cx: _local(cx, "projects", run_projects))


def _local(cx: Any, what: str, fn: Any, *, graph: bool = False) -> int:
    """Serving the API, credentials and project features are the local user's, never a
    session scope's. ``fn`` gets the reminders API, or with ``graph`` the whole graph."""
    from .scope import refuse_in_scope

    refuse_in_scope(what)
    return int(fn(cx.args, cx.graph if graph else cx.api, cx.out))


def run_api_command(args: argparse.Namespace, graph: Graph, out: TextIO) -> int:
    from ..api.server import run_api
    from .engines import serving_commands

    try:
        with serving_commands(graph):
            return run_api(
                graph,
                out,
                host=args.host,
                port=args.port,
                no_alerts=args.no_alerts,
                engine=not args.no_engine,
                verbose=args.verbose,
                allow_hosts=args.allow_host,
            )
    except ImportError as exc:
        raise InvalidInput(
            f"the HTTP API needs the api extra (pip install 'remindkit[api]'): {exc}",
            code="invalid_argument",
        ) from None


def run_api_open(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    """A one-time login URL for the running server of this home, opened in a browser."""
    import time
    import webbrowser
    from urllib.parse import urlencode

    from ..credential import live_servers, load_credential, login_ticket, server_for

    home = api.settings.home
    info = server_for(args.url, home) if args.url else next(iter(live_servers(home)), None)
    if info is None:
        raise NotFound(
            "no `remindkit api` of this home is running"
            + (f" at {args.url}" if args.url else "")
            + " (start one, with the same REMINDKIT_HOME)",
            code="not_found",
        )
    credential = load_credential(home)
    if credential is None:
        raise NotFound("no local credential in this home", code="not_found")
    page = "/?" + urlencode(
        {"project": args.project, **({"session": args.session} if args.session else {})}
    )
    base = (args.url or info["urls"][0]).rstrip("/")
    ticket = login_ticket(credential, str(info.get("instance", "")), now=time.time())
    url = f"{base}/login?" + urlencode({"ticket": ticket, "next": page})
    if args.json:
        out.write(json.dumps({"url": url}) + "\n")
        return 0
    opened = not args.print and webbrowser.open(url)
    out.write(f"{url}\n")
    out.write(
        "(opened in your browser; good once, for 10 minutes)\n"
        if opened
        else "(open it in your browser: good once, for 10 minutes)\n"
    )
    return 0


def run_api_reset(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    from ..credential import credential_path, reset_credential

    reset_credential(api.settings.home)
    path = credential_path(api.settings.home)
    if args.json:
        out.write(json.dumps({"credential": str(path)}) + "\n")
    else:
        out.write(f"a new credential in {path}; log browsers in again (`remindkit api open`)\n")
    return 0


def run_token(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    from ..api.tokens import create_token

    store = api.store
    now_us = to_us(api.clock.now())
    action = args.token_command
    if action == "create":
        if args.admin == bool(args.project):
            raise InvalidInput(
                "give --project P (and maybe --session S), or --admin", code="invalid_argument"
            )
        token_id, token = create_token(
            store.projects,
            project=args.project,
            session=args.session,
            read_only=args.read_only,
            now_us=now_us,
        )
        if args.json:
            out.write(json.dumps({"id": token_id, "token": token}) + "\n")
        else:
            out.write(f"{token}\n")
            out.write(f"(token {token_id}; shown once, only its hash is kept)\n")
        return 0
    if action == "ls":
        rows = store.projects.list_tokens()
        for r in rows:
            r["created_at"] = format_utc(from_us(r["created_at"]))
            r["last_used_at"] = (
                format_utc(from_us(r["last_used_at"])) if r["last_used_at"] else None
            )
        if args.json:
            out.write(json.dumps(rows) + "\n")
        elif not rows:
            out.write("no tokens (your own clients use the local credential)\n")
        else:
            for r in rows:
                where = r["project"] or "*"
                if r["session"]:
                    where += f"/{r['session']}"
                out.write(
                    f"{r['id']}  {r['scope']:8} {where}{'  read-only' if r['read_only'] else ''}  "
                    f"created {r['created_at']}\n"
                )
        return 0
    if action == "rm":
        if not store.projects.remove_token(args.id):
            raise NotFound(f"No token by the id of {args.id!r} was found", code="not_found")
        out.write(json.dumps({"removed": args.id}) + "\n" if args.json else f"removed {args.id}\n")
        return 0
    raise InvalidInput("say what to do: token create, ls or rm", code="invalid_argument")


def run_projects(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    from ..store.projects import check_project, project_not_found

    store = api.store
    now_us = to_us(api.clock.now())
    action = args.projects_command
    if action == "ls":
        rows = store.projects.list_projects()
        if args.json:
            out.write(json.dumps(rows) + "\n")
        else:
            for r in rows:
                flags = ", ".join(f"{k} {'on' if v else 'off'}" for k, v in r["features"].items())
                out.write(f"{r['name']}  {flags}\n")
        return 0
    if action == "create":
        got = store.projects.create_project(check_project(args.name), now_us=now_us)
        out.write(json.dumps(got) + "\n" if args.json else f"project {got['name']}\n")
        return 0
    if action == "features":
        name = check_project(args.project)
        if store.projects.get_project(name) is None:
            raise project_not_found(name)
        got = store.projects.set_feature(name, args.feature, args.action == "enable", now_us=now_us)
        state = "on" if got["features"][args.feature] else "off"
        out.write(
            json.dumps(got) + "\n" if args.json else f"project {name}: {args.feature} {state}\n"
        )
        return 0
    raise InvalidInput("say what to do: projects ls, create or features", code="invalid_argument")
