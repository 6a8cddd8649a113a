import { jsonObject, limitOf, list, optional, required, seg, UsageError, type Command, type Ctx } from "../command";
import { ApiCallError } from "../http";
import { table } from "../output";
import { safe } from "../printable.logic";

/** A webhook for people: what it receives, and how its deliveries are going. */
function describe(w: any): string {
  const h = w.health;
  const lines = [
    safe`${w.id}  ${w.status}  ${w.url}`,
    safe`events: ${w.events.join(",")}`,
    ...(w.description ? [safe`description: ${w.description}`] : []),
    ...(w.disabled_reason ? [safe`disabled: ${w.disabled_reason}`] : []),
    ...(w.rate_limit !== null && w.rate_limit !== undefined ? [safe`rate limit: ${w.rate_limit}/s`] : []),
  ];
  if (h) {
    const last = h.last_attempt;
    lines.push(
      last ? safe`last attempt: ${last.at} → ${last.status_code ?? "no answer"}${last.ok ? "" : " (failed)"}` : "last attempt: none",
      safe`failed in a row: ${h.consecutive_failed_attempts}; 24 h: ${h.attempts_24h.succeeded} of ${h.attempts_24h.total} succeeded`,
    );
  }
  return lines.join("\n");
}

const withSecret = (w: any, what: string) => `${describe(w)}\n${safe`${what}: ${w.secret} (shown once)`}`;

/** The body of `webhooks update`: only the options given. */
function changes(c: Ctx): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const url = optional(c, "url");
  const events = optional(c, "events");
  const description = optional(c, "description");
  const rateLimit = optional(c, "rate-limit");
  if (url !== undefined) body.url = url;
  if (events !== undefined) body.events = list(events);
  if (description !== undefined) body.description = description === "" ? null : description;
  if (rateLimit !== undefined) body.rate_limit = rateLimit === "none" ? null : Number(rateLimit);
  if (c.values.enable === true) body.status = "enabled";
  if (c.values.disable === true) body.status = "disabled";
  if (c.values.enable === true && c.values.disable === true) throw new UsageError("--enable and --disable exclude each other");
  if (Object.keys(body).length === 0) throw new UsageError("nothing to change: give at least one option");
  return body;
}

export const WEBHOOK_COMMANDS: Record<string, Command> = {
  "webhooks list": {
    args: "[--limit N]",
    summary: "the webhooks of the key's environment",
    options: { limit: { type: "string" } },
    async run(c) {
      const { data } = await c.api().call<any[]>("GET", `/webhooks?limit=${limitOf(c)}`);
      if (c.out.json) for (const hook of data) c.out.line(hook);
      else c.out.line(data, table(data, ["id", "url", "events", "status", "description"]));
    },
  },
  "webhooks get": {
    args: "WEBHOOK_ID",
    summary: "one webhook: its events, status, why it was disabled, and its health",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("GET", `/webhooks/${seg(c.positionals[0])}`);
      c.out.line(data, describe(data));
    },
  },
  "webhooks create": {
    args: "--url URL --events a.b,c.d [--description TEXT]",
    summary: "register a webhook; its signing secret is printed once",
    options: { url: { type: "string" }, events: { type: "string" }, description: { type: "string" } },
    async run(c) {
      const description = optional(c, "description");
      const body = { url: required(c, "url"), events: list(required(c, "events")), ...(description !== undefined && { description }) };
      const { data } = await c.api().call("POST", "/webhooks", body);
      c.out.line(data, withSecret(data, "signing secret"));
    },
  },
  "webhooks update": {
    args: "WEBHOOK_ID [--url URL] [--events a.b,c.d] [--description TEXT] [--rate-limit N|none] [--enable|--disable]",
    summary: "change a webhook; only the options given change",
    details: "--description '' clears it; --rate-limit none removes the limit; --enable also clears a disabled reason.",
    options: {
      url: { type: "string" },
      events: { type: "string" },
      description: { type: "string" },
      "rate-limit": { type: "string" },
      enable: { type: "boolean" },
      disable: { type: "boolean" },
    },
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("PATCH", `/webhooks/${seg(c.positionals[0])}`, changes(c));
      c.out.line(data, describe(data));
    },
  },
  "webhooks delete": {
    args: "WEBHOOK_ID",
    summary: "delete a webhook, and its delivery log with it (pending deliveries are not sent)",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("DELETE", `/webhooks/${seg(c.positionals[0])}`);
      c.out.line(data, safe`deleted ${data.id} (${data.url})`);
    },
  },
  "webhooks rotate": {
    args: "WEBHOOK_ID",
    summary: "a new signing secret, printed once; the old one also signs for 24 hours",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("POST", `/webhooks/${seg(c.positionals[0])}/rotate-secret`);
      c.out.line(data, withSecret(data, "new signing secret"));
    },
  },
  "webhooks test": {
    args: "WEBHOOK_ID [--type a.b] [--data JSON] [--timeout-ms N]",
    summary: "send a test delivery to this webhook alone and wait for its first attempt",
    details:
      "POST /webhooks/{id}/test: no event is stored, no other webhook or workflow sees it (webhooks:write).\nThe type is --type, else the webhook's first type; its data is --data (a JSON object, held to an event's limits),\nelse that type's example or latest event's data.\nExits 0 when the first attempt got a 2xx, 1 otherwise.",
    options: { type: { type: "string" }, data: { type: "string" }, "timeout-ms": { type: "string" } },
    positionals: 1,
    async run(c) {
      const api = c.api();
      const base = `/webhooks/${seg(c.positionals[0])}`;
      const type = optional(c, "type");
      const data = jsonObject(c, "data");
      const timeoutMs = Number(optional(c, "timeout-ms") ?? 30_000);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new UsageError("--timeout-ms must be a whole number of ms");
      const { data: sent } = await api.call("POST", `${base}/test`, {
        ...(type !== undefined && { event_type: type }),
        ...(data !== undefined && { data }),
      });
      const until = Date.now() + timeoutMs;
      for (let delivery = sent; ;) {
        if (delivery.attempts.length > 0) {
          // The first attempt decides, even if a retry has already followed it.
          const first = delivery.attempts[0];
          c.out.line(
            delivery,
            safe`${delivery.id} ${delivery.event_type} (test): attempt ${first.number} → ${first.status_code ?? "no answer"} (${first.duration_ms} ms)${first.error ? ` ${first.error}` : ""}`,
          );
          return first.status_code !== null && first.status_code < 300 ? 0 : 1;
        }
        if (Date.now() > until) throw new Error(`no attempt of test delivery ${sent.id} within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 250));
        try {
          ({ data: delivery } = await api.call("GET", `${base}/deliveries/${seg(sent.id)}`));
        } catch (err) {
          // Sending needs webhooks:write only; watching the attempt needs webhooks:read too.
          if (!(err instanceof ApiCallError && err.code === "insufficient_scope")) throw err;
          c.out.info("sent; the key cannot read deliveries (webhooks:read), so the attempt is not awaited");
          c.out.line(sent, safe`${sent.id} ${sent.event_type} (test): queued`);
          return 0;
        }
      }
    },
  },
};
