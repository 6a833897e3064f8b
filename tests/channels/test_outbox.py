"""The outbox over SQLite and PostgreSQL: one row per key, one sender per row,
rows of one route in order; and the pure pieces (splitting, back-off)."""

from __future__ import annotations

import threading

import pytest

from remindkit.cli.main import main
from remindkit.sessions.routed import TEXT_LIMIT, split_message
from remindkit.store import SqlStore
from remindkit.store.outbox import NewItem, Outbox, backoff_s

SEC = 1_000_000


def item(key: str, route: str = "r1", text: str = "hi") -> NewItem:
    return NewItem(
        key=key, route_key=route, route={"chat": 1}, payload={"text": text}, session_id="s"
    )


def test_a_key_is_written_once(store: SqlStore) -> None:
    box = Outbox(store, "telegram")
    first = box.enqueue([item("k1", text="first"), item("k1#2", text="second")], now_us=10)
    again = box.enqueue([item("k1", text="other"), item("k1#2", text="other")], now_us=20)
    assert (
        [r.payload["text"] for r in again]
        == ["first", "second"]
        == [r.payload["text"] for r in first]
    )
    assert len(box.rows()) == 2


def test_a_claimed_row_is_not_claimed_again_until_its_lease_ends(store: SqlStore) -> None:
    box = Outbox(store, "telegram")
    box.enqueue([item("k1")], now_us=0)
    [mine] = box.claim(owner="a", now_us=1 * SEC, lease_us=5 * SEC)
    assert box.claim(owner="b", now_us=2 * SEC, lease_us=5 * SEC) == []
    [taken_over] = box.claim(
        owner="b", now_us=7 * SEC, lease_us=5 * SEC
    )  # a died: its lease ran out
    assert taken_over.id == mine.id and taken_over.attempts == 2
    assert not box.mark_sent(mine, owner="a", now_us=8 * SEC, remote_id="1"), (
        "a stale owner cannot mark it"
    )
    assert box.mark_sent(taken_over, owner="b", now_us=8 * SEC, remote_id="2")
    [row] = box.rows()
    assert (row.state, row.remote_id) == ("sent", "2")
    assert box.claim(owner="c", now_us=60 * SEC, lease_us=5 * SEC) == []


def test_rows_of_one_route_go_out_in_order(store: SqlStore) -> None:
    box = Outbox(store, "telegram")
    box.enqueue([item("a1", "r1"), item("a2", "r1")], now_us=0)
    box.enqueue([item("b1", "r2")], now_us=0)
    got = box.claim(owner="x", now_us=SEC, lease_us=5 * SEC)
    assert sorted(r.key for r in got) == ["a1", "b1"]
    a1 = next(r for r in got if r.key == "a1")
    assert box.mark_sent(next(r for r in got if r.key == "b1"), owner="x", now_us=SEC)
    assert box.retry(a1, owner="x", error="429", next_attempt_us=10 * SEC)
    assert [r.key for r in box.claim(owner="y", now_us=2 * SEC, lease_us=5 * SEC)] == [], (
        "a2 waits behind a1"
    )
    [again] = box.claim(owner="y", now_us=10 * SEC, lease_us=5 * SEC)
    assert again.key == "a1" and again.last_error == "429"
    assert box.fail(again, owner="y", error="gone")
    assert [r.key for r in box.claim(owner="y", now_us=11 * SEC, lease_us=5 * SEC)] == ["a2"]


def test_concurrent_senders_never_share_a_row(store: SqlStore) -> None:
    box = Outbox(store, "webhook")
    for n in range(40):
        box.enqueue([item(f"k{n}", route=f"r{n}")], now_us=0)
    taken: dict[str, list[int]] = {}

    def sender(name: str) -> None:
        ids: list[int] = []
        for _ in range(10):
            ids += [r.id for r in box.claim(owner=name, now_us=SEC, lease_us=60 * SEC, limit=40)]
        taken[name] = ids

    threads = [threading.Thread(target=sender, args=(f"s{i}",)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    every = [i for ids in taken.values() for i in ids]
    assert len(every) == len(set(every)) == 40


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("", [0]),
        ("short", [5]),
        ("x" * TEXT_LIMIT, [TEXT_LIMIT]),
        ("x" * (TEXT_LIMIT + 1), [TEXT_LIMIT, 1]),
        ("word " * 1000, [4095, 905]),
        ("😀" * 3000, [2048, 952]),  # outside the BMP: two UTF-16 units each
    ],
    ids=["empty", "short", "exactly", "one-over", "at-a-space", "astral"],
)
def test_split_message(text: str, sizes: list[int]) -> None:
    pieces = split_message(text)
    assert [len(p) for p in pieces] == sizes
    assert all(len(p.encode("utf-16-le")) // 2 <= TEXT_LIMIT for p in pieces)
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_s(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert backoff_s(30) == 300


@pytest.mark.parametrize(
    ("args", "env", "code"),
    [
        (["--allow", "1"], {}, "invalid_argument"),  # no agent
        (["--command", "echo"], {"TELEGRAM_BOT_TOKEN": "1:x"}, "invalid_argument"),  # no allowlist
        (
            ["--command", "echo", "--allow", "abc"],
            {"TELEGRAM_BOT_TOKEN": "1:x"},
            "invalid_argument",
        ),
        (
            ["--command", "echo", "--allow", "1", "--allow-all"],
            {"TELEGRAM_BOT_TOKEN": "1:x"},
            "invalid_argument",
        ),
        (["--command", "echo", "--allow", "1"], {}, "telegram_token_missing"),
        (["--command", "echo", "--allow", "1", "--token-env", "A B"], {}, "invalid_argument"),
    ],
    ids=["no-agent", "no-allow", "bad-chat", "both-allows", "no-token", "bad-env-name"],
)
def test_telegram_refusals(
    args: list[str],
    env: dict[str, str],
    code: str,
    tmp_path,
    capsys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["telegram", "--db", db, "--json", *args]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == code


def test_a_huge_reply_is_cut_to_a_bounded_number_of_messages(store: SqlStore) -> None:
    from remindkit.sessions.routed import MAX_PIECES, queue_text

    route = {"bot": 1, "chat": 2, "thread": None}
    rows = queue_text(
        Outbox(store, "telegram"),
        route,
        key="big",
        text="y" * (TEXT_LIMIT * 50),
        session="s",
        now=0,
    )
    assert len(rows) == MAX_PIECES and rows[-1].payload["text"].startswith("(the reply was longer")
    assert [r.key for r in rows[:3]] == ["big", "big#2", "big#3"]
    assert {r.route_key for r in rows} == {"telegram:1:2:"}
