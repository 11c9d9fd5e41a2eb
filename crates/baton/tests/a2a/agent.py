"""A small A2A 1.0 agent built with the official SDK's server side (a2a-sdk, Starlette,
uvicorn), for Baton to hand work to: it prints its port on the first line of stdout, then
serves until killed.

    agent.py TOKEN [--log FILE] [--hold SECONDS] [--hold-until FILE]

Every request must carry `Authorization: Bearer TOKEN`. A task whose text asks a
"question?" is answered INPUT_REQUIRED with a question back; one asking "forever?" asks
again after every answer, and shows a new status message each time it is read (an agent
asking forever); a "hostile" one completes with U+0000, ESC and a right-to-left override
in its artifact, a "shady" one with ESC and the override only; any other message (an
answer to a question included) completes its task with one artifact, `Done: TEXT`.
Tasks are kept in memory.

`--log FILE` appends a line per JSON-RPC call (`METHOD MESSAGE-ID`) as it comes in;
`--hold SECONDS` holds the answer to each new SendMessage that long, and `--hold-until
FILE` until FILE exists (an agent that answers slowly, or not while the test says so):
the task is made and stored at once, only the answer waits; a caller that stops waiting
for a held answer is logged as `GONE MESSAGE-ID`.
"""

import argparse
import asyncio
import json
import os
import socket
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse, Response

from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb


FOREVER = set()


class Worker(AgentExecutor):
    async def execute(self, context, event_queue):
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = get_message_text(context.message)
        if "forever?" in text or task.id in FOREVER:
            FOREVER.add(task.id)
            await updater.requires_input(
                updater.new_agent_message([pb.Part(text="Which quarter, again?")])
            )
            return
        if "hostile" in text or "shady" in text:
            nul = "\u0000" if "hostile" in text else ""
            await updater.add_artifact(
                [pb.Part(text=f"Done{nul} \u001b[31mred\u001b[0m \u202eevil")], name="answer"
            )
            await updater.complete()
            return
        if "question?" in text:
            await updater.requires_input(
                updater.new_agent_message([pb.Part(text="Which quarter?")])
            )
            return
        await updater.start_work()
        await updater.add_artifact([pb.Part(text=f"Done: {text}")], name="answer")
        await updater.complete()

    async def cancel(self, context, event_queue):
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


class Key(BaseHTTPMiddleware):
    def __init__(self, app, args):
        super().__init__(app)
        self.args = args

    def note(self, line):
        if self.args.log:
            with open(self.args.log, "a") as log:
                log.write(line + "\n")

    async def dispatch(self, request, call_next):
        if request.headers.get("authorization") != f"Bearer {self.args.token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        try:
            frame = json.loads(await request.body())
        except ValueError:
            frame = {}
        method = frame.get("method", "") if isinstance(frame, dict) else ""
        params = frame.get("params") or {} if isinstance(frame, dict) else {}
        message = params.get("message") or {}
        self.note(f"{method} {message.get('messageId', params.get('id', ''))}")
        response = await call_next(request)
        if method == "SendMessage" and not message.get("taskId"):
            if self.args.hold:
                await asyncio.sleep(self.args.hold)
            while self.args.hold_until and not os.path.exists(self.args.hold_until):
                if await request.is_disconnected():
                    # The caller stopped waiting for the answer.
                    self.note(f"GONE {message.get('messageId', '')}")
                    break
                await asyncio.sleep(0.05)
        if method != "GetTask":
            return response
        body = b"".join([chunk async for chunk in response.body_iterator])
        answer = json.loads(body)
        status = (answer.get("result") or {}).get("status") or {}
        if status.get("message") and (answer["result"].get("id") in FOREVER):
            # A new status message each time it is read.
            status["message"]["messageId"] = uuid.uuid4().hex
        return Response(
            json.dumps(answer), status_code=response.status_code, media_type="application/json"
        )


def main(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    card = pb.AgentCard(
        name="researcher",
        description="Answers research tasks",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id="research", name="research", description="research", tags=["r"])],
    )
    handler = DefaultRequestHandlerV2(
        agent_executor=Worker(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    app = Starlette(routes=routes)
    app.add_middleware(Key, args=args)
    print(port, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("token")
    parser.add_argument("--log")
    parser.add_argument("--hold", type=float, default=0)
    parser.add_argument("--hold-until")
    main(parser.parse_args())
