import { seg, type Command } from "../command";
import type { Api } from "../http";
import type { Output } from "../output";
import { safe } from "../printable.logic";

/**
 * A delivery sent again: redelivered (a new series of attempts) once it has ended, or its next
 * attempt made now while it is still pending (the API refuses a redelivery of a pending one).
 */
async function resend(api: Api, out: Output, d: { id: string; webhook_id: string; status: string }): Promise<void> {
  const verb = d.status === "pending" ? "retry" : "redeliver";
  const { data } = await api.call("POST", `/webhooks/${seg(d.webhook_id)}/deliveries/${seg(d.id)}/${verb}`);
  out.line(
    { action: verb, delivery: data },
    safe`${verb === "retry" ? "retried" : "redelivered"} ${data.id} to ${data.webhook_id} (${data.event_type}): ${data.status}`,
  );
}

export const RESEND_COMMANDS: Record<string, Command> = {
  "events resend": {
    args: "EVENT_ID [--webhook WEBHOOK_ID]",
    summary: "send an event again to every webhook it was delivered to (or to one)",
    details: "Each of its deliveries is redelivered; one still pending gets its next attempt now instead.",
    options: { webhook: { type: "string" } },
    positionals: 1,
    async run(c) {
      const api = c.api();
      const only = typeof c.values.webhook === "string" ? c.values.webhook : undefined;
      const { data } = await api.call<any[]>("GET", `/events/${seg(c.positionals[0])}/deliveries?per_page=100`);
      const chosen = data.filter((d) => only === undefined || d.webhook_id === only);
      if (chosen.length === 0) {
        c.out.warn(
          only ? `no delivery of ${c.positionals[0]} to ${only}` : `${c.positionals[0]} has no deliveries: no webhook subscribed to it`,
        );
        return 1;
      }
      for (const d of chosen) await resend(api, c.out, d);
    },
  },
  "deliveries redeliver": {
    args: "WEBHOOK_ID DELIVERY_ID",
    summary: "send one delivery again (its next attempt now, if it is still pending)",
    positionals: 2,
    async run(c) {
      const api = c.api();
      const [webhook, delivery] = c.positionals;
      const { data } = await api.call("GET", `/webhooks/${seg(webhook)}/deliveries/${seg(delivery)}`);
      await resend(api, c.out, data);
    },
  },
};
