import { configured, platformOf } from "../../app/broker";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { ServiceBroker, type ServiceSchema } from "moleculer";
import { SERVICE_SCHEMAS } from "../../services";
import { DELIVERIES } from "../../shared/records/deliveries";
import { EVENTS, type EventDoc } from "../../shared/records/events";
import { declarationOf, declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { loadSettings } from "../../shared/config";
import { DATABASE_FILE } from "../../shared/storage/sqlite";
import { collectionSpec, type Doc, type ReadView } from "../../shared/storage/types";
import { api, startPlatform } from "../helpers/platform";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";

/**
 * One owner per collection (docs/architecture.md, "Who owns which collection"): every service declares
 * its collections through StoreMixin, the declared owners are disjoint, every collection read or
 * found in the store file has exactly one owner, and a collection a service only reads is a view
 * without write methods, refused at run time as at compile time.
 */
const declared = Object.entries(SERVICE_SCHEMAS).map(([name, schema]) => ({
  name,
  declaration: declarationOf(schema as Partial<ServiceSchema>),
}));

function ownersOf(): Map<string, string[]> {
  const owners = new Map<string, string[]>();
  for (const { name, declaration } of declared)
    for (const collection of declaration?.owns ?? []) owners.set(collection, [...(owners.get(collection) ?? []), name]);
  return owners;
}

describe("collection ownership", () => {
  it("every service with a store declares it, and no collection has two owners", () => {
    const withStore = declared.filter((d) => d.declaration !== null).map((d) => d.name);
    // auth keeps no data of its own: it asks keys.
    expect(withStore.sort()).toEqual(["analytics", "events", "gateway", "keys", "orgs", "webhook-dispatcher", "webhooks", "workflows"]);
    const shared = [...ownersOf()].filter(([, names]) => names.length > 1);
    expect(shared).toEqual([]);
    expect(ownersOf().get("events")).toEqual(["events"]);
    expect(ownersOf().get("webhook_deliveries")).toEqual(["webhook-dispatcher"]);
    expect(ownersOf().get("webhook_outcomes")).toEqual(["webhook-dispatcher"]);
    expect(ownersOf().get("workflow_outcomes")).toEqual(["workflows"]);
  });

  it("every collection a service reads has an owner", () => {
    const owners = ownersOf();
    const orphans = declared.flatMap(({ name, declaration }) =>
      (declaration?.reads ?? []).filter((c) => !owners.has(c)).map((c) => `${name} reads ${c}`),
    );
    expect(orphans).toEqual([]);
  });

  it("every collection in the store file of a platform that did some work has exactly one owner", async () => {
    const p = await startPlatform();
    let tables: string[];
    try {
      const { live } = await p.createOrg("Owners");
      const auth = { Authorization: `Bearer ${live}` };
      await api(p.baseUrl, "POST", "/events", { headers: auth, body: { type: "order.created", data: {} } });
      await api(p.baseUrl, "POST", "/api-keys", { headers: auth, body: { name: "k", scopes: ["events:read"] } });
      await api(p.baseUrl, "POST", "/workflows", {
        headers: auth,
        body: { name: "w", trigger: { type: "manual" }, steps: [{ id: "s", type: "delay", duration_ms: 1 }] },
      });
      const db = new DatabaseSync(join(p.dataDir, DATABASE_FILE), { readOnly: true });
      try {
        tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[])
          .map((r) => r.name)
          .filter((name) => !name.startsWith("_") && !name.startsWith("sqlite_"));
      } finally {
        db.close();
      }
    } finally {
      await p.stop();
    }
    const owners = ownersOf();
    expect(tables.length).toBeGreaterThan(10);
    expect(tables.filter((t) => owners.get(t)?.length !== 1)).toEqual([]);
  });
});

const NOTES = collectionSpec<Doc & { text: string }>("notes");
const OWNER = declareStore({ owns: { notes: NOTES } });
const READER = declareStore({ owns: {}, reads: { notes: NOTES, events: EVENTS } });

describe("StoreMixin enforcement", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  function brokerWith(...schemas: Partial<ServiceSchema>[]): ServiceBroker {
    const dir = mkdtempSync(join(tmpdir(), "wfp-own-"));
    dirs.push(dir);
    const broker = new ServiceBroker({ logger: false });
    const platform = platformOf(loadSettings({ DATA_DIR: dir, LOG_LEVEL: "false" }));
    for (const schema of schemas) broker.createService(configured(schema as ServiceSchema, platform));
    return broker;
  }

  it("hands a reader views without write methods, and refuses its atomic writes to them", async () => {
    let reader!: StoreVars<typeof READER>;
    let owner!: StoreVars<typeof OWNER>;
    const broker = brokerWith(
      {
        name: "owner",
        mixins: [StoreMixin(OWNER)],
        created() {
          owner = this as unknown as typeof owner;
        },
      },
      {
        name: "reader",
        mixins: [StoreMixin(READER)],
        created() {
          reader = this as unknown as typeof reader;
        },
      },
    );
    await broker.start();
    try {
      await owner.notes.insert({ id: "n1", org_id: "org_1", text: "mine" });
      expect(await reader.notes.get({ org_id: "org_1" }, "n1")).toMatchObject({ text: "mine" });
      const view = reader.notes as unknown as Record<string, unknown>;
      for (const write of ["insert", "update", "updateMany", "delete", "deleteMany", "increment"]) expect(view[write]).toBeUndefined();
      expect(Object.isFrozen(view)).toBe(true);
      // A view smuggled into an atomic write (past the types) is refused before anything is written.
      const smuggled = reader.notes as unknown as Parameters<typeof owner.store.atomically>[0][number]["collection"];
      await expect(reader.store.atomically([{ op: "insert", collection: smuggled, doc: { id: "n2", org_id: "org_1" } }])).rejects.toThrow(
        "the reader service does not own 'notes'",
      );
      expect(await reader.notes.get({ org_id: "org_1" }, "n2")).toBeNull();
      // The owner's own atomic writes go through.
      await owner.store.atomically([{ op: "insert", collection: owner.notes, doc: { id: "n3", org_id: "org_1" } }]);
      expect(await reader.notes.count({ org_id: "org_1" }, {})).toBe(2);
    } finally {
      await broker.stop();
    }
  });

  it("refuses a second owner of a collection in one broker", () => {
    expect(() => brokerWith({ name: "first", mixins: [StoreMixin(OWNER)] }, { name: "second", mixins: [StoreMixin(OWNER)] })).toThrow(
      "collection 'notes' is owned by the first service; second may only read it",
    );
  });
});

/**
 * Writes to collections a service only reads: each line must be a compile error (`npm run typecheck`
 * fails on an unused @ts-expect-error), so this function is type-checked and never called.
 */
function writesThatDoNotCompile(events: ReadView<EventDoc>, vars: StoreVars<typeof READER>): void {
  // @ts-expect-error a read view has no insert
  void events.insert({} as EventDoc);
  // @ts-expect-error nor updateMany
  void vars.events.updateMany({ org_id: "o" }, {}, {});
  // @ts-expect-error an atomic write takes collections, not views
  void vars.store.atomically([{ op: "insert", collection: vars.notes, doc: { id: "x", org_id: "o" } }]);
  // @ts-expect-error a service's store opens no collection by name
  void vars.store.collection(DELIVERIES.name);
}
void writesThatDoNotCompile;
