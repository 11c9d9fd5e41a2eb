// A2A calls through the official JavaScript SDK (@a2a-js/sdk, pinned in ../package.json),
// one a line: each line read on stdin is a JSON object naming the call, and its outcome is
// printed as one JSON line, `{"ok": RESULT}` (the SDK's object as ProtoJSON) or
// `{"error": CLASS, "message": …, "code": …, "data": …}`.
//
//   {"base": URL, "token": KEY, "op": "card"}
//   {"base": URL, "token": KEY, "op": "send", "message": MESSAGE, "configuration": {…}}
//   {"base": URL, "token": KEY, "op": "get", "id": ID, "historyLength": N}
//   {"base": URL, "token": KEY, "op": "list", "request": LIST_TASKS_REQUEST}
//   {"base": URL, "token": KEY, "op": "cancel", "id": ID}
//   {"base": URL, "token": KEY, "op": "extended"}
//
// Every call resolves the card from `base` as the SDK does by default (the resolver's own
// path, `.well-known/agent-card.json`, relative to `base`) and makes its client from the
// card; the key rides on every request as the SDK's own authenticating fetch sends it.

import readline from "node:readline";

import {
  AgentCard,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  Task,
} from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from "@a2a-js/sdk/client";

function keyed(token) {
  return createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
}

async function client(base, token) {
  const fetchImpl = keyed(token);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(base);
}

async function call(line) {
  const { base, token, op } = line;
  if (op === "card") {
    const card = await new DefaultAgentCardResolver({ fetchImpl: keyed(token) }).resolve(base);
    return AgentCard.toJSON(card);
  }
  const a2a = await client(base, token);
  switch (op) {
    case "send": {
      const request = SendMessageRequest.fromJSON({
        message: line.message,
        configuration: line.configuration,
      });
      const result = await a2a.sendMessage(request);
      return "messageId" in result
        ? { message: Message.toJSON(result) }
        : { task: Task.toJSON(result) };
    }
    case "get":
      return Task.toJSON(await a2a.getTask({ tenant: "", id: line.id, historyLength: line.historyLength }));
    case "list":
      return ListTasksResponse.toJSON(
        await a2a.listTasks(ListTasksRequest.fromJSON(line.request ?? {})),
      );
    case "cancel":
      return Task.toJSON(await a2a.cancelTask({ tenant: "", id: line.id, metadata: undefined }));
    case "extended":
      // The client itself asks only when the card offers it; its transport asks anyway,
      // naming the version as the client does.
      return AgentCard.toJSON(
        await a2a.transport.getExtendedAgentCard(
          { tenant: "" },
          { serviceParameters: { "A2A-Version": a2a.protocolVersion } },
        ),
      );
    default:
      throw new Error(`no op ${op}`);
  }
}

const lines = readline.createInterface({ input: process.stdin });
for await (const text of lines) {
  let outcome;
  try {
    outcome = { ok: await call(JSON.parse(text)) };
  } catch (e) {
    outcome = { error: e.name, message: e.message, code: e.envelopeCode ?? null, data: e.data ?? null };
  }
  process.stdout.write(JSON.stringify(outcome) + "\n");
}
