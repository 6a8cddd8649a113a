import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Context, ServiceBroker } from "moleculer";
import { Webhook } from "standardwebhooks";
import { waitFor } from "../../tools/procs";
import { createBroker } from "../../app/broker";
import { loadSettings } from "../../shared/config";
import { DELIVERIES, type DeliveryDoc } from "../../shared/records/deliveries";
import { EVENT_STORED, eventDoc, EVENTS, type EventDoc, type Marker } from "../../shared/records/events";
import { openStore } from "../../shared/storage";
import { ALL_TENANTS, openCollection, type Collection, type Store } from "../../shared/storage/types";
import type { Target } from "../../services/webhooks/webhooks.logic";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * The webhook dispatcher alone on a broker: its store on a temp DATA_DIR, the `webhooks` service it
 * calls stubbed at the broker, a real receiver on 127.0.0.1. Events are stored with the event log's
 * helper (which also emits the wake-up), or without a wake-up for the sweep to find; what is checked
 * is what the dispatcher is for: what the receiver gets, and the delivery log it leaves in the store.
 */
const DELAYS = [150, 300, 450, 600];
const ORG = "org_dispatcher";
const TENANT = { org_id: ORG, environment: "live" as const };

let dataDir: string;
let broker: ServiceBroker;
let store: Store;
let receiver: Receiver;
let deliveries: Collection<DeliveryDoc>;
let events: Collection<EventDoc>;
/** The stub's webhooks (as `webhooks.subscribers` and `webhooks.target` answer them), by id; tests add theirs and flip their status. */
const webhooks = new Map<string, Target>();
/** What the dispatcher told the stub through `webhooks.recordOutcome`. */
const outcomes: { id: string; ok: boolean }[] = [];

const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

function addWebhook(id: string, path: string, status: Target["status"] = "enabled"): Target {
  const hook: Target = {
    id,
    ...TENANT,
    url: receiver.url(path),
    events: ["*"],
    status,
    secrets: [newSecret()],
    consecutive_failures: 0,
    rate_limit: null,
  };
  receiver.setSecret(path, hook.secrets);
  webhooks.set(id, hook);
  return hook;
}

/** Stores an event as the events service does, and wakes the dispatcher. */
async function storeEvent(type: string, data: Record<string, unknown> = {}): Promise<EventDoc> {
  const event = await events.insert(eventDoc({ ...TENANT, type, data, source: "api" }, Date.now()));
  await broker.emit(EVENT_STORED, { event });
  return event;
}

const deliveriesOf = (webhookId: string) => deliveries.find(TENANT, { webhook_id: webhookId });

async function settledDelivery(webhookId: string, eventId: string): Promise<DeliveryDoc> {
  let found: DeliveryDoc | undefined;
  await waitFor(`the delivery of ${eventId} to ${webhookId} settled`, async () => {
    found = (await deliveriesOf(webhookId)).find((d) => d.event_id === eventId && d.status !== "pending");
    return found !== undefined;
  });
  return found!;
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "wfp-dispatcher-"));
  receiver = await startReceiver();
  const settings = loadSettings({
    DATA_DIR: dataDir,
    LOG_LEVEL: "false",
    SERVICES: "webhook-dispatcher",
    WEBHOOK_RETRY_DELAYS_MS: DELAYS.join(","),
    WEBHOOK_TIMEOUT_MS: "2000",
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  });
  store = openStore(settings);
  broker = createBroker(settings, {}, store);
  const hand = (hook: Target) => ({ ...hook });
  broker.createService({
    name: "webhooks",
    actions: {
      // Every webhook of the tenant, with its status: the dispatcher must not send to a disabled one
      // even when a list read before the change still holds it.
      subscribers: (ctx: Context<{ org_id: string; environment: string }>) =>
        ctx.params.org_id === ORG && ctx.params.environment === "live" ? [...webhooks.values()].map(hand) : [],
      target: (ctx: Context<{ org_id: string; id: string }>) => {
        const hook = ctx.params.org_id === ORG ? webhooks.get(ctx.params.id) : undefined;
        return hook ? hand(hook) : null;
      },
      recordOutcome: (ctx: Context<{ org_id: string; id: string; ok: boolean }>) => {
        outcomes.push({ id: ctx.params.id, ok: ctx.params.ok });
      },
    },
  });
  // The events service's part: the dispatcher has the markers of the events it handled unset.
  broker.createService({
    name: "events",
    actions: {
      unmark: async (ctx: Context<{ marker: Marker; ids: string[] }>) =>
        events.updateMany(ALL_TENANTS, { id: { $in: ctx.params.ids } }, { $unset: { [ctx.params.marker]: true } }),
    },
  });
  deliveries = openCollection(store, DELIVERIES);
  events = openCollection(store, EVENTS);
  await broker.start();
});

afterAll(async () => {
  await broker?.stop();
  await receiver?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

afterEach(() => webhooks.clear());

describe("the webhook dispatcher on its own broker", () => {
  it("sends a stored event, signed, to each subscribed webhook, and records the delivery", async () => {
    const hook = addWebhook("wh_ok", "/ok");
    const event = await storeEvent("order.created", { n: 1 });

    await receiver.waitFor(() => receiver.byPath("/ok").some((r) => r.json?.id === event.id));
    const [got] = receiver.byPath("/ok").filter((r) => r.json?.id === event.id);
    expect(got.json).toEqual({ id: event.id, type: "order.created", created_at: event.created_at, data: { n: 1 } });
    // Verified as the Standard Webhooks library does it, with the webhook's secret.
    expect(new Webhook(hook.secrets[0]).verify(got.body, got.headers)).toEqual(got.json);
    expect(got.verified).toBe(true);
    expect(got.headers["service-event"]).toBe("order.created");

    const delivery = await settledDelivery(hook.id, event.id);
    expect(delivery).toMatchObject({ status: "succeeded", event_type: "order.created", next_attempt_at: null });
    expect(delivery.id).toBe(got.headers["service-delivery"]);
    expect(delivery.attempts).toEqual([expect.objectContaining({ number: 1, status_code: 200, error: null })]);
    // Fanned out: the event's marker is gone, so no sweep sends it again.
    await waitFor(
      "the event's undispatched marker unset",
      async () => (await events.get(TENANT, event.id))?.undispatched_since === undefined,
    );
  });

  it("retries a failing receiver on the schedule, then fails the delivery and tells the webhooks service", async () => {
    const hook = addWebhook("wh_failing", "/failing");
    receiver.behave("/failing", () => ({ status: 500 }));
    const event = await storeEvent("order.failed");

    const delivery = await settledDelivery(hook.id, event.id);
    expect(delivery.status).toBe("failed");
    expect(delivery.attempts.map((a) => a.status_code)).toEqual([500, 500, 500, 500, 500]);

    const sent = receiver.byPath("/failing").filter((r) => r.json?.id === event.id);
    expect(sent).toHaveLength(5);
    expect(new Set(sent.map((r) => r.headers["service-delivery"]))).toEqual(new Set([delivery.id]));
    expect(sent.every((r) => r.verified)).toBe(true);
    // Each retry waits at least its delay (plus up to 10 % jitter) after the attempt before it was answered.
    const gaps = sent.slice(1).map((r, i) => r.at - sent[i].at);
    gaps.forEach((gap, i) => expect({ retry: i + 1, gap, atLeast: gap >= DELAYS[i] }).toEqual({ retry: i + 1, gap, atLeast: true }));
    await waitFor("the failure recorded on the webhook", () => outcomes.some((o) => o.id === hook.id && !o.ok));
  });

  it("sends nothing to a disabled webhook, nor a retry to one disabled meanwhile", async () => {
    const off = addWebhook("wh_off", "/off", "disabled");
    const flip = addWebhook("wh_flip", "/flip");
    // The first attempt fails; the webhook is disabled before its retry falls due.
    receiver.behave("/flip", () => {
      flip.status = "disabled";
      return { status: 500 };
    });
    const event = await storeEvent("order.shipped");

    const flipped = await settledDelivery(flip.id, event.id);
    expect(flipped.status).toBe("failed");
    expect(flipped.attempts).toEqual([
      expect.objectContaining({ number: 1, status_code: 500 }),
      expect.objectContaining({ number: 2, status_code: null, error: "not sent: the webhook is disabled" }),
    ]);
    expect(receiver.byPath("/flip").filter((r) => r.json?.id === event.id)).toHaveLength(1);

    // A delivery for the webhook disabled from the start, if one is made, settles without a sent attempt.
    await waitFor("no pending delivery to the disabled webhook", async () =>
      (await deliveriesOf(off.id)).every((d) => d.status !== "pending"),
    );
    for (const d of await deliveriesOf(off.id)) expect(d.attempts.every((a) => a.status_code === null)).toBe(true);
    expect(receiver.byPath("/off")).toEqual([]);
  });

  it("redelivers a settled delivery as a new series, and refuses one whose status changed meanwhile", async () => {
    const hook = addWebhook("wh_again", "/again");
    const event = await storeEvent("order.paid");
    const first = await settledDelivery(hook.id, event.id);
    expect(first.status).toBe("succeeded");

    const stale = { ...TENANT, webhook_id: hook.id, id: first.id, status: "failed", series_start: first.attempts.length };
    await expect(broker.call("webhook-dispatcher.redeliver", stale)).rejects.toMatchObject({ type: "invalid_state" });

    const again = { ...TENANT, webhook_id: hook.id, id: first.id, status: "succeeded", series_start: first.attempts.length };
    const updated = await broker.call<DeliveryDoc, typeof again>("webhook-dispatcher.redeliver", again);
    expect(updated).toMatchObject({ id: first.id, status: "pending", series_start: 1 });

    await receiver.waitFor(() => receiver.byPath("/again").filter((r) => r.headers["service-delivery"] === first.id).length === 2);
    expect(receiver.byPath("/again").every((r) => r.verified && r.json?.id === event.id)).toBe(true);
    await waitFor("the redelivery settled", async () => (await deliveries.get(TENANT, first.id))?.attempts.length === 2);
    expect(await deliveries.get(TENANT, first.id)).toMatchObject({
      status: "succeeded",
      series_start: 1,
      attempts: [expect.objectContaining({ number: 1, status_code: 200 }), expect.objectContaining({ number: 2, status_code: 200 })],
    });
  });

  it("finds an event whose wake-up was lost with its sweep of the log", async () => {
    const hook = addWebhook("wh_swept", "/swept");
    // Stored without the wake-up (as when no dispatcher listened at the time).
    const event = await events.insert(eventDoc({ ...TENANT, type: "order.lost", data: {}, source: "api" }, Date.now()));
    await receiver.waitFor(() => receiver.byPath("/swept").some((r) => r.json?.id === event.id && r.verified), 10_000);
    expect((await settledDelivery(hook.id, event.id)).status).toBe("succeeded");
  });

  it("forgets a deleted webhook's deliveries, and only that webhook's", async () => {
    const gone = addWebhook("wh_gone", "/gone");
    const kept = addWebhook("wh_kept", "/kept");
    const event = await storeEvent("order.closed");
    await settledDelivery(gone.id, event.id);
    await settledDelivery(kept.id, event.id);
    const before = (await deliveriesOf(gone.id)).length;

    expect(await broker.call("webhook-dispatcher.forget", { org_id: ORG, webhook_id: gone.id })).toBe(before);
    expect(await deliveriesOf(gone.id)).toEqual([]);
    expect((await deliveriesOf(kept.id)).map((d) => d.event_id)).toContain(event.id);
  });
});
