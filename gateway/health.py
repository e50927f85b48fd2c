"""What ``GET /healthz`` and ``GET /metrics`` report: whether the gateway
does its job, not only whether its HTTP server answers.

* **down** (HTTP 503): the process loop has stopped, or no channel runs:
  messages are not being answered, so a supervisor should restart it.
* **degraded** (HTTP 200): replies go out, but something needs a look: a
  channel failed while others run, replies wait in the outbox (a platform
  unreachable), extraction keeps failing (the memory model's endpoint) or
  has not run for a day, the inbound queue is nearly full. Not 503: restarting would not fix the model endpoint, and taking
  the bot out of a load balancer's rotation would cost the replies too.
* **ok** otherwise.

A permission a platform refused the app (Feishu's ``im:chat:readonly``,
for group titles) is listed under ``refused`` whatever the status: it
costs a nicety, not replies.

Nothing here reads a message or a memory: counts, ages and names only, so
the endpoints can be open where the Feishu webhook is. A channel's failure
reason stays in the log (it may quote a platform's error).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from memory.clock import Clock, parse_ts
from memory.engine import Backlog

from .bus import MessageBus
from .loop import LoopStats, percentile

__all__ = ["DEGRADED", "DOWN", "OK", "Health", "Snapshot"]

OK, DEGRADED, DOWN = "ok", "degraded", "down"
STALE_EXTRACTION = timedelta(hours=26)  # the daily flush (03:00) empties the buffer once a day
QUEUE_NEARLY_FULL = 0.9
QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True)
class Snapshot:
    status: str
    problems: list[str]
    loop_running: bool
    channels: dict[str, bool]  # name -> running (False: failed)
    inbound_queued: int
    inbound_capacity: int
    outbound_queued: dict[str, int]
    stats: LoopStats | None
    backlog: Backlog | None
    oldest_waiting_s: float | None
    outbox_waiting: int | None = None  # replies kept for redelivery (gateway/delivery.py)
    # channel -> a permission its platform refused the app (gateway/chattitles.py)
    refused: dict[str, str] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)  # more gauges: name -> value

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "problems": self.problems,
            "loop": "running" if self.loop_running else "stopped",
            "channels": {n: "running" if up else "failed" for n, up in self.channels.items()},
            "queue": {"inbound": self.inbound_queued, "capacity": self.inbound_capacity,
                      "outbound": self.outbound_queued},
        }
        if self.backlog is not None:
            out["extraction"] = {"waiting": self.backlog.lines, "retrying": self.backlog.retrying,
                                 "failing": self.backlog.stuck, "oldest_waiting_s": self.oldest_waiting_s,
                                 "set_aside": self.backlog.set_aside}
        if self.outbox_waiting is not None:
            out["outbox"] = {"waiting": self.outbox_waiting}
        if self.refused:
            out["refused"] = dict(self.refused)
        if self.extra:
            out["gauges"] = self.extra
        return out


Gauge = Callable[[], Awaitable[float]]


class Health:
    """Reads the gateway's parts when asked (never on the reply path).
    ``channels`` and ``failed`` are the App's own dicts, read live."""

    def __init__(
        self,
        *,
        clock: Clock,
        bus: MessageBus,
        loop_running: Callable[[], bool],
        stats: LoopStats | None,
        channels: Mapping[str, object],
        failed: Mapping[str, str],
        backlog: Callable[[], Awaitable[Backlog]] | None = None,
        outbox: Callable[[], int] | None = None,
        refused: Callable[[], Mapping[str, str]] | None = None,
        stuck_after: int = 5,
    ) -> None:
        self.clock = clock
        self.bus = bus
        self.loop_running = loop_running
        self.stats = stats
        self.channels = channels
        self.failed = failed
        self.backlog = backlog
        self.outbox = outbox
        self.refused = refused
        self.stuck_after = stuck_after
        self.gauges: dict[str, tuple[str, Gauge]] = {}  # name -> (help, reader): more parts a caller reports

    def add_gauge(self, name: str, help_text: str, read: Gauge) -> None:
        self.gauges[name] = (help_text, read)

    async def snapshot(self) -> Snapshot:
        problems: list[str] = []
        down = False
        running = self.loop_running()
        if not running:
            problems.append("the process loop has stopped: messages are not answered")
            down = True
        channels = {n: True for n in self.channels} | {n: False for n in self.failed if n not in self.channels}
        if not any(channels.values()):
            problems.append("no channel is running")
            down = True
        problems += [f"channel {n} failed (see the log)" for n, up in channels.items() if not up and any(channels.values())]
        capacity = self.bus.inbound.maxsize
        queued = self.bus.inbound.qsize()
        if capacity and queued >= QUEUE_NEARLY_FULL * capacity:
            problems.append(f"the inbound queue is nearly full ({queued} of {capacity})")
        backlog = await self.backlog() if self.backlog is not None else None
        oldest_s: float | None = None
        if backlog is not None:
            if backlog.oldest is not None:
                oldest_s = max(0.0, (self.clock.now() - parse_ts(backlog.oldest)).total_seconds())
            if backlog.stuck:
                problems.append(
                    f"extraction failed {self.stuck_after} times or more for {backlog.stuck} waiting message(s): "
                    "check the memory model's endpoint (myclaw doctor)"
                )
            elif oldest_s is not None and oldest_s > STALE_EXTRACTION.total_seconds():
                problems.append(f"a message has waited {oldest_s / 3600:.0f} h for extraction")
        waiting = self.outbox() if self.outbox is not None else None
        if waiting:
            problems.append(f"{waiting} repl{'y waits' if waiting == 1 else 'ies wait'} in the outbox for redelivery")
        extra = {name: float(await read()) for name, (_, read) in self.gauges.items()}
        # Not a problem: group titles are a nicety, and "degraded" would keep
        # paging an operator who chose not to grant the scope.
        refused = dict(self.refused()) if self.refused is not None else {}
        status = DOWN if down else DEGRADED if problems else OK
        return Snapshot(
            status=status,
            problems=problems,
            loop_running=running,
            channels=channels,
            inbound_queued=queued,
            inbound_capacity=capacity,
            outbound_queued={n: self.bus.outbound_queue(n).qsize() for n in channels},
            stats=self.stats,
            backlog=backlog,
            oldest_waiting_s=oldest_s,
            outbox_waiting=waiting,
            refused=refused,
            extra=extra,
        )

    def metrics(self, s: Snapshot) -> str:
        """Prometheus' text exposition format (version 0.0.4)."""
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                shown = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
                out.append(f"{name}{{{shown}}} {_num(value)}" if shown else f"{name} {_num(value)}")

        metric("myclaw_up", "gauge", "1 while messages are answered (not down)", [({}, 0 if s.status == DOWN else 1)])
        metric("myclaw_healthy", "gauge", "1 when /healthz says ok (0: degraded or down)", [({}, s.status == OK)])
        metric("myclaw_channel_up", "gauge", "1 for a running channel, 0 for one that failed",
               [({"channel": n}, up) for n, up in sorted(s.channels.items())])
        metric("myclaw_inbound_queued", "gauge", "messages on the bus waiting for the process loop",
               [({}, s.inbound_queued)])
        metric("myclaw_outbound_queued", "gauge", "replies waiting for their channel's sender",
               [({"channel": n}, q) for n, q in sorted(s.outbound_queued.items())])
        st = s.stats
        if st is not None:
            for name, value, help_text in (
                ("received", st.received, "messages taken from the bus"),
                ("replied", st.replied, "replies written"),
                ("ignored", st.ignored, "group messages not addressed to the bot, empty messages"),
                ("commands", st.commands, "commands answered without the model"),
                ("failed", st.failed, "messages answered with an apology (the model failed)"),
                ("errors", st.errors, "unexpected errors while handling a message"),
                ("retrievals", st.retrievals, "messages that searched long-term memory"),
                ("rate_limited", st.limited, "messages over a user's rate limit, not answered"),
                ("redelivered", st.redelivered, "messages delivered again after being answered, ignored"),
                ("revised", st.revised, "edits and recalls of earlier messages applied"),
                ("buffered", st.buffered, "conversation rows handed to memory"),
                ("buffer_errors", st.buffer_errors, "failures handing rows to memory (retried)"),
            ):
                metric(f"myclaw_messages_{name}_total", "counter", help_text, [({}, value)])
            for name, samples, help_text in (
                ("added", st.added_ms, "time the gateway adds to a reply, model calls excluded"),
                ("wait", st.wait_ms, "time a message waits for its chat's turn and a slot"),
                ("retrieval", st.retrieval_ms, "memory recall time"),
                ("llm", st.llm_ms, "model call time"),
            ):
                values = list(samples)
                metric(f"myclaw_{name}_seconds", "gauge",
                       f"{help_text}, over the latest {len(values)} messages, by quantile",
                       [({"quantile": str(q)}, percentile(values, q) / 1000) for q in QUANTILES])
        if s.backlog is not None:
            b = s.backlog
            metric("myclaw_extraction_waiting", "gauge", "messages waiting for fact extraction", [({}, b.lines)])
            metric("myclaw_extraction_retrying", "gauge", "of them, whose extraction failed at least once",
                   [({}, b.retrying)])
            metric("myclaw_extraction_failing", "gauge", f"of them, failed {self.stuck_after} times or more",
                   [({}, b.stuck)])
            metric("myclaw_extraction_oldest_waiting_seconds", "gauge", "age of the oldest waiting message",
                   [({}, s.oldest_waiting_s or 0.0)])
            metric("myclaw_extraction_set_aside", "gauge",
                   "messages the memory model could not take even alone: kept, not retried", [({}, b.set_aside)])
        if s.outbox_waiting is not None:
            metric("myclaw_outbox_waiting", "gauge", "replies kept for redelivery (channel trouble)",
                   [({}, s.outbox_waiting)])
        if s.refused:
            metric("myclaw_permission_refused", "gauge",
                   "1 for a permission the channel's platform refused the app (granting it clears it)",
                   [({"channel": c, "scope": scope}, 1) for c, scope in sorted(s.refused.items())])
        for name, reading in s.extra.items():
            metric(name, "gauge", self.gauges[name][0], [({}, reading)])
        return "\n".join(out) + "\n"


def _num(v: float) -> str:
    return repr(float(v)) if isinstance(v, float) else str(int(v))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
