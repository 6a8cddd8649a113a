import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceBroker } from "moleculer";
import { loadSettings } from "../../shared/config";
import { bindSettings } from "../../shared/runtime";
import { MsgpackrSerializer } from "../../shared/serializer";
import { openStoreForBroker } from "../../shared/storage";
import { MongooseStore } from "../../shared/storage/mongoose";
import { NedbStore } from "../../shared/storage/nedb";
import { connectSocket, serveSocket } from "../../shared/storage/socket";
import StoreService from "../../services/store/store.service";
import { startNats } from "../../tools/procs";
import { describeStoreContract } from "../helpers/store-contract";

const tempDir = () => mkdtempSync(join(tmpdir(), "wfp-s-"));

describeStoreContract(
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
);

describeStoreContract("remote over the unix socket (the CLI's path)", async () => {
  const dir = tempDir();
  const owner = new NedbStore(dir);
  const server = await serveSocket(owner, dir);
  const store = await connectSocket(dir);
  if (!store) throw new Error("socket did not connect");
  return {
    store,
    async stop() {
      await store.close();
      await new Promise((r) => server?.close(r));
      await owner.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describeStoreContract("remote over NATS to the store node", async () => {
  const dir = tempDir();
  const nats = await startNats();
  const node = (nodeID: string, services: string) => {
    const broker = new ServiceBroker({ nodeID, namespace: "contract", transporter: { type: "NATS", options: { url: nats.url } }, serializer: new MsgpackrSerializer(), logger: false });
    bindSettings(broker, loadSettings({ DATA_DIR: dir, TRANSPORTER: nats.url, SERVICES: services }));
    return broker;
  };
  const owner = node("store-node", "store");
  owner.createService(StoreService);
  const client = node("client-node", "keys");
  await Promise.all([owner.start(), client.start()]);
  const store = openStoreForBroker(loadSettings({ DATA_DIR: dir, TRANSPORTER: nats.url, SERVICES: "keys" }), client);
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
});

// MongoDB runs in docker-compose and wherever MONGO_URL points; no server can run on this machine.
const mongoUrl = process.env.MONGO_URL;
if (mongoUrl) {
  describeStoreContract("MongoDB (mongoose)", async () => {
    const url = new URL(mongoUrl);
    url.pathname = `/wfp_contract_${Date.now()}`;
    const store = new MongooseStore(url.toString());
    return { store, stop: () => store.close() };
  });
}

describe("the embedded store's lock", () => {
  it("refuses a second owner of a DATA_DIR held by a live process, and takes over a stale lock", async () => {
    const dir = tempDir();
    try {
      // pid 1 is always alive and never this test.
      writeFileSync(join(dir, "store.lock"), "1");
      expect(() => new NedbStore(dir)).toThrow(/in use by process 1/);
      writeFileSync(join(dir, "store.lock"), "999999999");
      const store = new NedbStore(dir);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
