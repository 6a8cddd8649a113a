import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../../tools/procs";
import { SERVICE_NAMES } from "../../shared/config";
import { openStore } from "../../shared/storage";
import { ALL_TENANTS, openCollection } from "../../shared/storage/types";
import { outboxSpec } from "../../shared/runtime/outbox";
import type { PublishedEvent } from "../../shared/records/events";
import { api, startPlatform, usePlatform, type Platform } from "../helpers/platform";

/**
 * The transactional outbox: keys (like webhooks and workflows) store their event with the change in
 * a row of their own outbox, then hand it to the events service, the event log's only writer. A
 * process that stops between the two steps, or an events service out of reach, loses nothing: the
 * relay hands the rows over later, and each event is stored exactly once.
 */
const createdEvents = async (p: Platform, key: string, keyIds: string[]) => {
  const res = await api(p.baseUrl, "GET", "/events?type=api_key.created&per_page=100", { headers: { Authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  return (res.body.data as { data: { key_id: string } }[]).filter((e) => keyIds.includes(e.data.key_id));
};

const createKeys = async (p: Platform, key: string, n: number): Promise<string[]> => {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      api(p.baseUrl, "POST", "/api-keys", {
        headers: { Authorization: `Bearer ${key}` },
        body: { name: `k${i}`, scopes: ["events:read"] },
      }),
    ),
  );
  expect(answers.map((a) => a.status)).toEqual(answers.map(() => 201));
  return answers.map((a) => a.body.data.id as string);
};

describe("events recorded through the outbox", () => {
  const suite = usePlatform();

  it("a burst of key creations stores every key's api_key.created, each once, by the time each answers", async () => {
    const ids = await createKeys(suite.p, suite.acme.live, 40);
    const events = await createdEvents(suite.p, suite.acme.live, ids);
    expect(events.map((e) => e.data.key_id).sort()).toEqual([...ids].sort());
    // Nothing is left in the outbox once handed over (the row is removed just after the answer).
    const store = openStore({ dataDir: suite.p.dataDir, mongoUrl: undefined });
    try {
      const rows = openCollection(store, outboxSpec("keys"));
      await waitFor("the keys outbox to empty", async () => (await rows.count(ALL_TENANTS, {})) === 0);
    } finally {
      await store.close();
    }
  });

  it("an event handed over twice (a relay after a crash) is stored once", async () => {
    const event: PublishedEvent = {
      id: "evt_outboxtwice000000000000001",
      org_id: suite.acme.org.id,
      environment: "live",
      type: "api_key.created",
      data: { key_id: "key_twice", name: "twice", environment: "live" },
      source: "keys",
      created_at: new Date().toISOString(),
    };
    expect(await suite.p.broker.call("events.publish", { events: [event] })).toEqual([event.id]);
    expect(await suite.p.broker.call("events.publish", { events: [event] })).toEqual([]);
    expect(await createdEvents(suite.p, suite.acme.live, ["key_twice"])).toHaveLength(1);
  });
});

describe("the outbox relay", () => {
  let dataDir: string;
  beforeAll(() => (dataDir = mkdtempSync(join(tmpdir(), "wfp-outbox-"))));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("stores, after a restart, the events a node could not hand over: each exactly once", async () => {
    // A node without the events service: every hand-over fails after the key and its outbox row are stored.
    const without = await startPlatform({ DATA_DIR: dataDir, SERVICES: SERVICE_NAMES.filter((s) => s !== "events").join(",") });
    let org: Awaited<ReturnType<Platform["createOrg"]>>;
    let ids: string[];
    try {
      org = await without.createOrg("Crashy");
      ids = await createKeys(without, org.live, 5);
    } finally {
      await without.stop();
    }
    const store = openStore({ dataDir, mongoUrl: undefined });
    try {
      const rows = openCollection(store, outboxSpec("keys"));
      // The org's two bootstrap keys and the five created: all waiting.
      expect(await rows.count(ALL_TENANTS, {})).toBe(7);

      const full = await startPlatform({ DATA_DIR: dataDir });
      try {
        await waitFor("the relay to empty the keys outbox", async () => (await rows.count(ALL_TENANTS, {})) === 0);
        const events = await createdEvents(full, org.live, ids);
        expect(events.map((e) => e.data.key_id).sort()).toEqual([...ids].sort());
        // Exactly once, also for the bootstrap keys: seven api_key.created in the org's two environments.
        const all = await Promise.all(
          [org.live, org.test].map((k) =>
            api(full.baseUrl, "GET", "/events?type=api_key.created&per_page=100", { headers: { Authorization: `Bearer ${k}` } }),
          ),
        );
        expect(all[0].body.data.length + all[1].body.data.length).toBe(7);
      } finally {
        await full.stop();
      }
    } finally {
      await store.close();
    }
  });
});
