"""A write call over MCP, with its approval put to the person in the host when it is staged.

The protocol era decides how the host is asked (``server.mcp.host_approval``): on a 2025-era connection the
server sends ``elicitation/create`` inside the call while it keeps polling for the dashboard's decision; on
2026-07-28 the call answers an ``InputRequiredResult`` (the form and a sealed request state) and the host
retries it with the person's answer. A session whose ``write.approval_channel`` is ``dashboard``, or a client
that declared no form elicitation, waits for the dashboard alone, as before.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server.mcp import host_approval
from server.mcp.tools.dispatch import Parked, ToolRunner

Answer = tuple[dict[str, Any], bool]


def _answer_in(responses: types.InputResponses | None) -> host_approval.HostAnswer:
    """The person's answer among the host's input responses; none (or not a form's answer): no decision."""
    found = (responses or {}).get(host_approval.INPUT_KEY)
    if isinstance(found, types.ElicitResult):
        return host_approval.answer_of(found)
    return host_approval.HostAnswer("cancel")


async def write_call(runner: ToolRunner, ctx: Any, params: types.CallToolRequestParams) -> Answer | Parked:
    """Run a write call for ``ctx``'s connection; a ``Parked`` call is for the adapter to answer with
    ``input_required`` (``input_required``)."""
    progress = ctx.session.report_progress
    if params.request_state is not None or params.input_responses:
        if params.request_state is None:
            return host_approval.forged("input responses without a request state").to_dict(), True
        answer = _answer_in(params.input_responses)
        return await runner.resume_write(params.name, params.arguments, params.request_state, answer, progress)
    if runner.writes.detached or not host_approval.asks(
        runner.config.approval_channel, ctx.session.client_capabilities
    ):
        return await runner.call_write(params.name, params.arguments, progress)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return await runner.stage_for_host(params.name, params.arguments)

    async def ask(message: str) -> host_approval.HostAnswer:
        result = await ctx.session.elicit_form(message, host_approval.FORM_SCHEMA, related_request_id=ctx.request_id)
        return host_approval.answer_of(result)

    return await runner.call_write(params.name, params.arguments, progress, ask)


def input_required(parked: Parked) -> types.InputRequiredResult:
    """The 2026-07-28 answer of a parked call: the form for the person, the state the host echoes."""
    request = types.ElicitRequest(params=host_approval.elicit_params(parked.message))
    return types.InputRequiredResult(input_requests={host_approval.INPUT_KEY: request}, request_state=parked.state)
