"""Agent tools over the scheduler's store: ``cron_add``, ``cron_list``,
``cron_remove``. A job made by the agent runs as the asking user and replies
into the chat it was asked from, never another: otherwise anyone could make
the bot post into any chat it can reach, on a timer. A job made in the
user's private chat may use their private memory; a group's job gets what a
group gets (shared memory only). Users' jobs are limited in number and in how
often they run (``cron.max_jobs_per_user``, ``cron.min_interval_minutes``;
one-time jobs count in the first, the second is for schedules); the
operator's ``myclaw cron add`` is not.

``cron_add`` takes a ``schedule`` (recurring) or ``at`` (once, a local date
and time in the user's zone, the one the prompt's current date is in).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from .cron import CronError, CronJob, CronStore, once_local, parse_at, shortest_gap, validate_schedule
from .timezones import zone_name
from .tools import Tool, ToolContext, ToolError

__all__ = ["cron_tools"]


def _minutes(gap: timedelta) -> str:
    minutes = int(gap.total_seconds() // 60)
    return "minute" if minutes == 1 else f"{minutes} minutes"


def _describe(j: CronJob) -> str:
    memory = "private memory" if j.private else "shared memory only"
    if j.once:
        return f"{j.id}: once at {once_local(j)} -> {j.message!r} (to {j.channel} chat {j.chat_id}, {memory})"
    zone = f", {j.timezone}" if j.timezone else ""
    return f"{j.id}: '{j.schedule}'{zone} -> {j.message!r} (to {j.channel} chat {j.chat_id}, {memory}; next {j.next_run_at})"


# In a group the model reads, and its reply shows, only the jobs made in that
# group: a job's message is the user's own words ("remind me: my biopsy
# results"), and one made in their private chat may say what the group must
# not read (/jobs is refused there for the same reason). Removing one of
# those from a group is refused too, as memory_forget is.
_ELSEWHERE = " (jobs made in other chats are listed and removed only in the user's private chat)"


def _here(job: CronJob, ctx: ToolContext) -> bool:
    return ctx.private or (job.channel, job.chat_id) == (ctx.channel, ctx.chat_id)


def cron_tools(store: CronStore, *, max_jobs: int = 10, min_interval_minutes: int = 10) -> list[Tool]:
    min_gap = timedelta(minutes=min_interval_minutes)

    async def add(args: Mapping[str, Any], ctx: ToolContext) -> str:
        schedule, at, message = args.get("schedule") or None, args.get("at") or None, args.get("message")
        if not isinstance(message, str):
            raise ToolError("'message' is required: what to ask the assistant when the job runs")
        if (schedule is None) == (at is None):
            raise ToolError(
                "give exactly one of 'schedule' (a recurring job, cron fields) and 'at' (a one-time job, a local "
                "date and time, 'YYYY-MM-DD HH:MM')" + (", not both" if schedule is not None else "")
            )
        if not isinstance(schedule or at, str):
            raise ToolError("'schedule' and 'at' are strings")
        # Older prompts (and models) may still name a target; only this chat is allowed.
        for key, here in (("channel", ctx.channel), ("chat_id", ctx.chat_id)):
            asked = args.get(key)
            if asked not in (None, "") and str(asked) != here:
                raise ToolError(
                    "a job can only reply into the chat it is made in; ask from that chat "
                    "(the operator can add jobs for other chats with `myclaw cron add`)"
                )
        tz = ctx.tz or store.tz
        try:
            when = parse_at(at, tz) if isinstance(at, str) else None
            if isinstance(schedule, str):
                schedule = validate_schedule(schedule)
                gap = shortest_gap(schedule, store.clock.now(), tz)
                if gap < min_gap:
                    raise CronError(
                        f"{schedule!r} runs as often as every {_minutes(gap)}; jobs may run at most every "
                        f"{min_interval_minutes} minutes"
                    )
            if len(await store.list(user=ctx.user)) >= max_jobs:  # internal jobs belong to no user
                raise CronError(f"you already have {max_jobs} scheduled jobs, the most allowed; remove one first")
            job = await store.add(
                schedule=schedule,
                at=when,
                message=message,
                channel=ctx.channel,
                chat_id=ctx.chat_id,
                user=ctx.user,
                private=ctx.private,
                tz=ctx.tz if when is None else tz,
            )
        except CronError as exc:
            raise ToolError(str(exc)) from exc
        return f"scheduled {_describe(job)}" + ("" if job.once else f" (times in {zone_name(tz)})")

    async def list_jobs(args: Mapping[str, Any], ctx: ToolContext) -> str:
        jobs = [j for j in await store.list(user=ctx.user) if _here(j, ctx)]
        listed = "\n".join(_describe(j) for j in jobs) or "no scheduled jobs"
        return listed if ctx.private else listed + _ELSEWHERE

    async def remove(args: Mapping[str, Any], ctx: ToolContext) -> str:
        job_id = args.get("id")
        if not isinstance(job_id, str) or not job_id:
            raise ToolError("'id' is required")
        job = await store.get(job_id)
        if job is not None and not _here(job, ctx):
            # As unknown: whatever asked for it in a group may be another member's line.
            raise ToolError(f"no job {job_id!r} in this chat" + _ELSEWHERE)
        try:
            await store.remove(job_id, user=ctx.user)
        except CronError as exc:
            raise ToolError(str(exc)) from exc
        return f"removed {job_id}"

    return [
        Tool(
            name="cron_add",
            description=(
                "Schedule a task: at its time the message is run through the assistant and the reply is sent "
                "to this chat (only this chat). For something to happen once (\"remind me tomorrow at 9\", "
                "\"in 2 hours\") give `at`, a local date and time; for something that repeats (\"every "
                "weekday at 9\") give `schedule`, five cron fields. Exactly one of the two. Times are in the "
                "user's time zone, the one of the current date and time in your instructions (work out `at` "
                f"from them). At most {max_jobs} jobs per user; a schedule runs at most every "
                f"{min_interval_minutes} minutes. Only a job made in the user's private chat may use their "
                "private memory."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "at": {
                        "type": "string",
                        "description": "one-time job: local date and time 'YYYY-MM-DD HH:MM', still to come",
                    },
                    "schedule": {"type": "string", "description": "recurring job: cron expression, e.g. '0 9 * * 1-5'"},
                    "message": {
                        "type": "string",
                        "description": "what to ask the assistant when it runs, e.g. 'Remind me to call mom'",
                    },
                },
                "required": ["message"],
            },
            handler=add,
        ),
        Tool(
            name="cron_list",
            description="List the user's scheduled tasks (in a group chat, those made in that group).",
            parameters={"type": "object", "properties": {}},
            handler=list_jobs,
            acts=False,
        ),
        Tool(
            name="cron_remove",
            description="Remove one of the user's scheduled tasks by id (in a group chat, one made in that group).",
            parameters={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            handler=remove,
        ),
    ]
