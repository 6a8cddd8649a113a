import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Datastore from "@seald-io/nedb";
import { ServiceBroker } from "moleculer";
import mongoose from "mongoose";
import StoreService from "../../services/store/store.service";
import { loadSettings } from "../../shared/config";
import { bindSettings } from "../../shared/runtime";
import { MsgpackrSerializer } from "../../shared/serializer";
import { localEmbeddedStore, openStoreForBroker, openStoreForCli } from "../../shared/storage";
import { MongooseStore } from "../../shared/storage/mongoose";
import { NedbStore } from "../../shared/storage/nedb";
import { RemoteStore } from "../../shared/storage/remote";
import { serveSocket } from "../../shared/storage/socket";
import { ALL_TENANTS, type Doc } from "../../shared/storage/types";
import { startNats } from "../../tools/nats";
import { describeStoreContract, type StoreUnderTest } from "../helpers/store-contract";

const tempDir = () => mkdtempSync(join(tmpdir(), "wfp-s-"));

const ADAPTERS: [string, () => Promise<StoreUnderTest>, { persistent?: boolean }?][] = [
  [
    "embedded (nedb)",
    async () => {
      const dir = tempDir();
      let store = new NedbStore(dir);
      return {
        store,
        async reopen() {
          await store.close();
          store = new NedbStore(dir);
          return store;
        },
        async stop() {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    { persistent: true },
  ],
  [
    "remote over the unix socket, as the CLI reaches a running server",
    async () => {
      const dir = tempDir();
      const owner = new NedbStore(dir);
      const server = await serveSocket(owner, dir);
      const store = await openStoreForCli(loadSettings({ DATA_DIR: dir }));
      expect(store).toBeInstanceOf(RemoteStore);
      return {
        store,
        async stop() {
          await store.close();
          await server?.close();
          await owner.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  ],
];

// nats-server comes from Debian's package (`npm test` installs it); without it this suite fails.
{
  ADAPTERS.push([
    "remote over NATS to the store node",
    async () => {
      const dir = tempDir();
      const nats = await startNats();
      const node = (nodeID: string, services: string) => {
        const broker = new ServiceBroker({ nodeID, transporter: { type: "NATS", options: { url: nats.url } }, serializer: new MsgpackrSerializer(), logger: false });
        bindSettings(broker, loadSettings({ DATA_DIR: dir, TRANSPORTER: nats.url, SERVICES: services }));
        return broker;
      };
      const owner = node("store-node", "store");
      owner.createService(StoreService);
      const client = node("keys-node", "keys");
      await Promise.all([owner.start(), client.start()]);
      const store = openStoreForBroker(loadSettings({ DATA_DIR: dir, TRANSPORTER: nats.url, SERVICES: "keys" }), client);
      expect(store).toBeInstanceOf(RemoteStore);
      return {
        store,
        async stop() {
          await store.close();
          await client.stop();
          await owner.stop();
          await nats.stop();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  ]);
}

// No MongoDB server can run on this machine; wherever MONGO_URL points to one, it is tested too.
const mongoUrl = process.env.MONGO_URL;
if (mongoUrl) {
  ADAPTERS.push([
    "MongoDB (mongoose)",
    async () => {
      const url = new URL(mongoUrl);
      url.pathname = `/wfp_contract_${process.pid}_${Date.now()}`;
      const store = new MongooseStore(url.toString());
      return {
        store,
        async stop() {
          await store.close();
          const conn = await mongoose.createConnection(url.toString()).asPromise();
          await conn.dropDatabase();
          await conn.close();
        },
      };
    },
  ]);
}

for (const [name, make, opts] of ADAPTERS) describeStoreContract(name, make, opts);

interface Note extends Doc {
  text: string;
}
const A = { org_id: "org_a", environment: "live" } as const;

describe("the embedded store's lock", () => {
  let dir: string;
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses a DATA_DIR held by another live process, naming it", async () => {
    const other = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      writeFileSync(join(dir, "store.lock"), `${other.pid}\n`);
      expect(() => new NedbStore(dir)).toThrow(`is in use by process ${other.pid}`);
    } finally {
      other.kill("SIGKILL");
    }
  });

  it("takes over the lock of a process that is gone, and releases it on close", async () => {
    writeFileSync(join(dir, "store.lock"), "999999999\n");
    const store = new NedbStore(dir);
    expect(() => new NedbStore(dir)).toThrow(/already open in this process/);
    await store.close();
    expect(existsSync(join(dir, "store.lock"))).toBe(false);
    await new NedbStore(dir).close();
  });
});

describe("the store's wiring", () => {
  let dir: string;
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("shares one embedded store per DATA_DIR between brokers, until the last handle closes", async () => {
    const settings = loadSettings({ DATA_DIR: dir });
    const first = openStoreForBroker(settings, new ServiceBroker({ logger: false }));
    const second = openStoreForBroker(settings, new ServiceBroker({ logger: false }));
    await first.collection<Note>("notes").insert({ id: "n1", ...A, text: "hi" });
    await first.close();
    expect(await second.collection<Note>("notes").get(A, "n1")).toMatchObject({ text: "hi" });
    await second.close();
    // Released: the files can be opened (and locked) again.
    await new NedbStore(dir).close();
  });

  it("serves the CLI through DATA_DIR/store.sock while the store service runs, and hands the files over when it stops", async () => {
    const broker = new ServiceBroker({ logger: false });
    bindSettings(broker, loadSettings({ DATA_DIR: dir, SERVICES: "store" }));
    broker.createService(StoreService);
    await broker.start();
    const server = localEmbeddedStore(dir);
    try {
      const cli = await openStoreForCli(loadSettings({ DATA_DIR: dir }));
      expect(cli).toBeInstanceOf(RemoteStore);
      await cli.collection<Note>("notes").insert({ id: "n1", ...A, text: "from the cli" });
      await cli.close();
      expect(await server.collection<Note>("notes").get(A, "n1")).toMatchObject({ text: "from the cli" });
    } finally {
      await server.close();
      await broker.stop();
    }
    expect(existsSync(join(dir, "store.sock"))).toBe(false);
    const direct = await openStoreForCli(loadSettings({ DATA_DIR: dir }));
    expect(direct).toBeInstanceOf(NedbStore);
    expect(await direct.collection<Note>("notes").count(ALL_TENANTS, {})).toBe(1);
    await direct.close();
  });

  it("opens the files when a dead owner left its socket behind", async () => {
    writeFileSync(join(dir, "store.sock"), "");
    const store = await openStoreForCli(loadSettings({ DATA_DIR: dir }));
    expect(store).toBeInstanceOf(NedbStore);
    await store.close();
  });

  it("runs without the socket where DATA_DIR's path is too long for one", async () => {
    const deep = join(dir, "d".repeat(120));
    mkdirSync(deep);
    const broker = new ServiceBroker({ logger: false });
    bindSettings(broker, loadSettings({ DATA_DIR: deep, SERVICES: "store" }));
    broker.createService(StoreService);
    await broker.start();
    expect(existsSync(join(deep, "store.sock"))).toBe(false);
    await broker.stop();
  });
});

describe("embedded store durability (group commit)", () => {
  it("has every acknowledged write in its file before answering, without a close", async () => {
    const dir = tempDir();
    const store = new NedbStore(dir);
    try {
      const col = store.collection<Doc & { n: number }>("durable", [{ fields: { n: 1 }, unique: true }]);
      const tenant = { org_id: "org_a" };
      await Promise.all(Array.from({ length: 50 }, (_, i) => col.insert({ id: `d_${i}`, org_id: "org_a", n: i })));
      await col.update(tenant, { id: "d_1" }, { $set: { n: 1001 } });
      await col.updateMany(tenant, { n: { $lt: 5 } }, { $inc: { n: 100 } });
      await col.delete(tenant, { id: "d_2" });
      await col.deleteMany(tenant, { n: { $gte: 40, $lt: 45 } });
      // What a crash right now would leave: the file as it is, read by a fresh nedb.
      const copy = tempDir();
      copyFileSync(join(dir, "durable.db"), join(copy, "durable.db"));
      const reread = new Datastore({ filename: join(copy, "durable.db") });
      await reread.loadDatabaseAsync();
      const docs = (await reread.findAsync({})) as unknown as { _id: string; n: number }[];
      const byId = new Map(docs.map((d) => [d._id, d.n]));
      expect(docs).toHaveLength(50 - 1 - 5);
      expect(byId.get("d_1")).toBe(1001);
      expect(byId.get("d_0")).toBe(100);
      expect(byId.has("d_2")).toBe(false);
      expect(byId.has("d_42")).toBe(false);
      rmSync(copy, { recursive: true, force: true });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
