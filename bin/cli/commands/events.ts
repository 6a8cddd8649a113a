import { jsonObject, optional, required, UsageError, type Command, type Options } from "../command";
import { listen } from "../listen";
import { safe } from "../printable.logic";
import { tailDeliveries, tailEvents } from "../tail";
import { FIXTURES, triggerEvent } from "../trigger";

export const EVENT_COMMANDS: Record<string, Command> = {
  trigger: {
    args: "TYPE [--data JSON]",
    summary: "emit an event through the API; system types are produced by fixtures",
    details: [
      "A client type (order.created) is emitted with --data (a JSON object; default {}).",
      "A system type cannot be emitted by clients: the CLI makes it happen through the API instead, as a",
      "fixture named 'cli trigger fixture' that removes itself:",
      "  api_key.created, api_key.revoked        a key with events:read, created and revoked at once",
      "  workflow.completed, workflow.deleted    a one-step workflow, run to its end, then deleted",
      "  approval.requested, approval.decided    a workflow asking an approval, rejected, then deleted",
      "  webhook.deleted                         a webhook on a type nothing emits, created and deleted",
      "webhook.disabled, workflow.chain_limited and member.role_changed have no fixture.",
    ].join("\n"),
    options: { data: { type: "string" } },
    positionals: 1,
    async run(c) {
      const data = jsonObject(c, "data") ?? {};
      const type = c.positionals[0];
      const result = await triggerEvent(c.api(), type, data);
      if (result === null)
        throw new UsageError(`'${type}' is a system type with no fixture; fixtures: ${Object.keys(FIXTURES).join(", ")}`);
      c.out.line(result, result.fixture ? safe`${type}: fixture ran (${result.note})` : safe`emitted ${result.event.id} ${type}`);
    },
  },
  "events tail": {
    args: "[--type a.b]",
    summary: "print new events of the key's environment as they are stored (until Ctrl-C)",
    details:
      "Polls by cursor: after a 429 it waits as Retry-After says, after a network error or a restart it asks again, and goes on from the last event printed.",
    options: { type: { type: "string" } },
    async run(c) {
      await tailEvents(c.api(), c.out, optional(c, "type"));
    },
  },
  "deliveries tail": {
    args: "[--webhook WEBHOOK_ID]… [--listener SESSION_ID]",
    summary: "print new delivery attempts as they happen (every webhook's by default; until Ctrl-C)",
    details:
      "Without --webhook it follows the newest 100 webhooks, and those created while it runs.\nRetries of deliveries pending from before it started are printed too. Waits out 429s and restarts like events tail.",
    options: { webhook: { type: "string", multiple: true }, listener: { type: "string" } } as Options,
    async run(c) {
      await tailDeliveries(c.api(), c.out, (c.values.webhook as string[] | undefined) ?? [], optional(c, "listener"));
    },
  },
  listen: {
    args: "--forward-to http://localhost:PORT/path [--events a.b,c.*] [--timeout-ms N]",
    summary: "receive the platform's events as signed deliveries and forward them to a local URL",
    details:
      "Prints the session's signing secret first (verify with the Standard Webhooks libraries);\nit stays the same when the CLI reconnects, until the CLI stops.\nEach local answer (status, time, the body's first 1 KiB) goes to the delivery log:\nGET /v1/listen/{session}/deliveries, or deliveries tail --listener SESSION.",
    options: { "forward-to": { type: "string" }, events: { type: "string" }, "timeout-ms": { type: "string" } },
    async run(c) {
      const forwardTo = required(c, "forward-to");
      if (!/^https?:\/\/\S+$/.test(forwardTo)) throw new UsageError("--forward-to must be an http(s) URL");
      const timeoutMs = Number(optional(c, "timeout-ms") ?? 10_000);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new UsageError("--timeout-ms must be a whole number of ms");
      await listen(c.api(), c.out, { forwardTo, events: optional(c, "events"), timeoutMs });
    },
  },
};
