"""Coordination between engines and surfaces: the engine registry (heartbeats),
named leases (the alerter's), flags, and pausing all firing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, or_, select, update

from ..audit import EventKind, Surface
from . import schema as t
from .events import event_row, write_events
from .role import Role

PAUSED_ALL = "paused_all"


class Coordination(Role):
    """Engines, leases and flags."""

    # -- flags ---------------------------------------------------------------------------

    def get_flag(self, name: str, default: str | None = None) -> str | None:
        with self.read() as conn:
            value = conn.execute(select(t.flags.c.value).where(t.flags.c.name == name)).scalar()
        return default if value is None else str(value)

    def set_flag(self, name: str, value: str, *, now_us: int) -> None:
        with self.write() as conn:
            self._set_flag(conn, name, value, now_us)

    def _set_flag(self, conn: Connection, name: str, value: str, now_us: int) -> None:
        done = conn.execute(
            update(t.flags).where(t.flags.c.name == name).values(value=value, updated_at=now_us)
        )
        if done.rowcount == 0:
            conn.execute(insert(t.flags).values(name=name, value=value, updated_at=now_us))

    def paused_all(self) -> bool:
        return self.get_flag(PAUSED_ALL, "0") == "1"

    def set_paused_all(
        self, paused: bool, *, now_us: int, surface: Surface | str = Surface.API
    ) -> None:
        """Pause or resume all firing; the event (``paused``/``resumed``, no reminder) says ``all``."""
        with self.write() as conn:
            self._set_flag(conn, PAUSED_ALL, "1" if paused else "0", now_us)
            write_events(
                conn,
                [
                    event_row(
                        EventKind.PAUSED if paused else EventKind.RESUMED,
                        surface,
                        at_us=now_us,
                        session=None,
                        reminder_id=None,
                        detail={"all": True},
                    )
                ],
            )

    # -- alerter lease and engine registry -----------------------------------------------

    def hold_lease(
        self, name: str, *, holder: str, priority: int, until_us: int, now_us: int
    ) -> tuple[str, int, int]:
        """Take or renew the named lease if it is free, expired, ours, or held at a lower
        priority. Returns the (holder, priority, until) that holds it afterwards."""
        lc = t.leases.c
        with self.write(notify=False, durable=False) as conn:  # a lease outlives no power cut
            res = conn.execute(
                update(t.leases)
                .where(
                    lc.name == name,
                    or_(lc.holder == holder, lc.until < now_us, lc.priority < priority),
                )
                .values(holder=holder, priority=priority, until=until_us)
            )
            if res.rowcount == 0:
                conn.execute(
                    self.dialect.insert(t.leases)
                    .values(name=name, holder=holder, priority=priority, until=until_us)
                    .on_conflict_do_nothing(index_elements=["name"])
                )
            row = conn.execute(
                select(lc.holder, lc.priority, lc.until).where(lc.name == name)
            ).one()
            return row[0], row[1], row[2]

    def lease_holder(self, name: str, *, now_us: int) -> tuple[str, int] | None:
        with self.read() as conn:
            row = conn.execute(_LEASE_HOLDER, {"name": name, "now": now_us}).first()
        return None if row is None else (row[0], row[1])

    def drop_lease(self, name: str, *, holder: str) -> None:
        with self.write(notify=False) as conn:
            conn.execute(
                delete(t.leases).where(t.leases.c.name == name, t.leases.c.holder == holder)
            )

    def heartbeat(
        self, *, engine_id: str, host: str, pid: int, role: str, priority: int, now_us: int
    ) -> None:
        with self.write(notify=False, durable=False) as conn:  # liveness: moot after a power cut
            res = conn.execute(_HEARTBEAT, {"eid": engine_id, "at": now_us})
            if res.rowcount == 0:
                conn.execute(
                    insert(t.engines).values(
                        id=engine_id,
                        host=host,
                        pid=pid,
                        role=role,
                        alert_priority=priority,
                        started_at=now_us,
                        heartbeat_at=now_us,
                    )
                )

    def unregister_engine(self, engine_id: str) -> None:
        with self.write(notify=False) as conn:
            conn.execute(delete(t.engines).where(t.engines.c.id == engine_id))

    def live_engines(self, *, since_us: int) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute(select(t.engines).where(t.engines.c.heartbeat_at >= since_us)).all()
        return [dict(r._mapping) for r in rows]


# Built once: an idle engine runs these every few seconds, and a statement built anew
# costs SQLAlchemy more than SQLite's work.
_LEASE_HOLDER = select(t.leases.c.holder, t.leases.c.priority).where(
    t.leases.c.name == bindparam("name"), t.leases.c.until >= bindparam("now")
)
_HEARTBEAT = (
    update(t.engines).where(t.engines.c.id == bindparam("eid")).values(heartbeat_at=bindparam("at"))
)


__all__ = ["PAUSED_ALL", "Coordination"]
