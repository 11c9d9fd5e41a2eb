"""One A2A client call through the official SDK (a2a-sdk), its outcome printed as one
JSON line: `{"ok": RESULT}` (the SDK's object as ProtoJSON) or `{"error": CLASS, ...}`.

    client.py BASE TOKEN card
    client.py BASE TOKEN send MESSAGE_ID CONTEXT_ID|- TEXT [TASK_ID|- [DATA_JSON]]
    client.py BASE TOKEN get TASK_ID
    client.py BASE TOKEN list [CONTEXT_ID]
    client.py BASE TOKEN cancel TASK_ID

BASE is the agent's base URL (`http://HOST:PORT/v1/projects/NAME/a2a/PARTICIPANT`): the
card is resolved from it with the SDK's resolver, and the client made from the card.
"""

import asyncio
import json
import sys

import httpx
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb


def out(value):
    print(json.dumps(value, sort_keys=True))


async def main(base, token, command, args):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        try:
            card = await A2ACardResolver(http, base).get_agent_card()
        except Exception as e:  # the resolver wraps HTTP errors
            out({"error": type(e).__name__, "message": str(e)})
            return
        if command == "card":
            raw = (await http.get(f"{base}/.well-known/agent-card.json")).json()
            # Strict: every field the server sent is one A2A 1.0's AgentCard has.
            ParseDict(raw, pb.AgentCard(), ignore_unknown_fields=False)
            out({"ok": MessageToDict(card)})
            return
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        try:
            if command == "send":
                message_id, context, text = args[0], args[1], args[2]
                message = pb.Message(
                    message_id=message_id, role=pb.ROLE_USER, parts=[pb.Part(text=text)]
                )
                if context != "-":
                    message.context_id = context
                if len(args) > 3 and args[3] != "-":
                    message.task_id = args[3]
                if len(args) > 4:
                    part = pb.Part()
                    ParseDict(json.loads(args[4]), part.data)
                    message.parts.append(part)
                events = []
                async for event in client.send_message(pb.SendMessageRequest(message=message)):
                    events.append(MessageToDict(event))
                out({"ok": events[-1]["task"]})
            elif command == "get":
                task = await client.get_task(pb.GetTaskRequest(id=args[0]))
                out({"ok": MessageToDict(task)})
            elif command == "list":
                request = pb.ListTasksRequest(include_artifacts=True)
                if args:
                    request.context_id = args[0]
                listed = await client.list_tasks(request)
                out({"ok": MessageToDict(listed)})
            elif command == "cancel":
                task = await client.cancel_task(pb.CancelTaskRequest(id=args[0]))
                out({"ok": MessageToDict(task)})
            else:
                raise SystemExit(f"no command {command}")
        except Exception as e:
            out({"error": type(e).__name__, "message": str(e)})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
