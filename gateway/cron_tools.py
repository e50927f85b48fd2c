"""Agent tools over the scheduler's store: ``cron_add``, ``cron_list``,
``cron_remove``. A job made by the agent runs as the asking user and, unless
told otherwise, replies into the chat it was asked from; a user sees and
removes only their own jobs. A job uses the user's private memory only when
it was made in their private chat and replies there: a group's job, or one
sent to another chat, gets what a group gets (shared memory only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .cron import CronError, CronJob, CronStore
from .tools import Tool, ToolContext, ToolError

__all__ = ["cron_tools"]


def _describe(j: CronJob) -> str:
    memory = "private memory" if j.private else "shared memory only"
    return f"{j.id}: '{j.schedule}' -> {j.message!r} (to {j.channel} chat {j.chat_id}, {memory}; next {j.next_run_at})"


def cron_tools(store: CronStore) -> list[Tool]:
    async def add(args: Mapping[str, Any], ctx: ToolContext) -> str:
        schedule, message = args.get("schedule"), args.get("message")
        if not isinstance(schedule, str) or not isinstance(message, str):
            raise ToolError("'schedule' and 'message' are required strings")
        channel = str(args.get("channel") or ctx.channel)
        chat_id = str(args.get("chat_id") or ctx.chat_id)
        try:
            job = await store.add(
                schedule=schedule,
                message=message,
                channel=channel,
                chat_id=chat_id,
                user=ctx.user,
                private=ctx.private and (channel, chat_id) == (ctx.channel, ctx.chat_id),
            )
        except CronError as exc:
            raise ToolError(str(exc)) from exc
        return f"scheduled {_describe(job)} (times in {store.tz.key})"

    async def list_jobs(args: Mapping[str, Any], ctx: ToolContext) -> str:
        jobs = await store.list(user=ctx.user)
        return "\n".join(_describe(j) for j in jobs) or "no scheduled jobs"

    async def remove(args: Mapping[str, Any], ctx: ToolContext) -> str:
        job_id = args.get("id")
        if not isinstance(job_id, str) or not job_id:
            raise ToolError("'id' is required")
        try:
            await store.remove(job_id, user=ctx.user)
        except CronError as exc:
            raise ToolError(str(exc)) from exc
        return f"removed {job_id}"

    return [
        Tool(
            name="cron_add",
            description=(
                "Schedule a recurring task: at each time of the cron schedule (five fields, "
                f"timezone {store.tz.key}) the message is run through the assistant and the reply is sent "
                "to this chat (or the given channel/chat). Only a job made in the user's private chat and "
                "replying there may use their private memory."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "schedule": {"type": "string", "description": "cron expression, e.g. '0 9 * * 1-5'"},
                    "message": {"type": "string", "description": "what to ask the assistant at each run"},
                    "channel": {"type": "string", "description": "optional: telegram, feishu, ..."},
                    "chat_id": {"type": "string", "description": "optional: target chat id"},
                },
                "required": ["schedule", "message"],
            },
            handler=add,
        ),
        Tool(
            name="cron_list",
            description="List the user's scheduled tasks.",
            parameters={"type": "object", "properties": {}},
            handler=list_jobs,
        ),
        Tool(
            name="cron_remove",
            description="Remove one of the user's scheduled tasks by id.",
            parameters={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            handler=remove,
        ),
    ]
