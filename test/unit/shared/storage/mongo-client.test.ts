import { createServer, type AddressInfo } from "node:net";
import mongoose from "mongoose";
import { clientOptions, OPERATION_TIMEOUT_MS, topologyProblem } from "../../../../shared/storage/mongo-client";
import { MongooseStore } from "../../../../shared/storage/mongoose";

const { BSON, MongoClient } = mongoose.mongo;

/** A local port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  await new Promise((ok) => server.close(ok));
  return port;
}

describe("the MongoDB client's options", () => {
  it("are accepted by the driver as they are meant", () => {
    // What mongoose passes on to the driver: all but its own three.
    const { bufferCommands, autoIndex, autoCreate, ...driver } = clientOptions();
    expect({ bufferCommands, autoIndex, autoCreate }).toEqual({ bufferCommands: false, autoIndex: false, autoCreate: false });
    const client = new MongoClient("mongodb://127.0.0.1:1/wfp?replicaSet=rs0", driver);
    expect(client.options).toMatchObject({
      ignoreUndefined: true,
      retryWrites: true,
      retryReads: true,
      waitQueueTimeoutMS: OPERATION_TIMEOUT_MS,
    });
    expect(client.options.writeConcern).toMatchObject({ w: "majority", wtimeoutMS: OPERATION_TIMEOUT_MS });
    // The server's time limit answers before the socket's, and a primary is waited for less than either.
    expect(client.options.socketTimeoutMS).toBeGreaterThan(OPERATION_TIMEOUT_MS);
    expect(client.options.serverSelectionTimeoutMS).toBeLessThan(OPERATION_TIMEOUT_MS);
  });

  it("leave undefined out of what the driver writes, where its default would store null", () => {
    const written = (ignoreUndefined: boolean) =>
      BSON.deserialize(BSON.serialize({ a: undefined, b: { c: undefined }, d: 1 }, { ignoreUndefined }));
    expect(written(clientOptions().ignoreUndefined!)).toEqual({ b: {}, d: 1 });
    expect(written(false)).toEqual({ a: null, b: { c: null }, d: 1 });
  });
});

describe("the replica set check at connect", () => {
  it("accepts a replica set member and mongos, and refuses a standalone server saying how to fix it", () => {
    expect(topologyProblem({ isWritablePrimary: true, setName: "rs0" })).toBeUndefined();
    expect(topologyProblem({ isWritablePrimary: false, secondary: false, setName: "rs0" })).toBeUndefined();
    expect(topologyProblem({ isWritablePrimary: true, msg: "isdbgrid" })).toBeUndefined();
    expect(topologyProblem({ isWritablePrimary: true, maxWireVersion: 21 })).toMatch(
      /standalone.*--replSet rs0.*rs\.initiate\(\).*replicaSet=rs0/,
    );
  });
});

describe("a MongoDB store whose server cannot be reached", () => {
  let store: MongooseStore;
  const warnings: string[] = [];
  beforeAll(async () => {
    const url = `mongodb://127.0.0.1:${await closedPort()}/wfp_unreachable?directConnection=true`;
    store = new MongooseStore(url, { warn: (m) => warnings.push(m), client: { serverSelectionTimeoutMS: 300 } });
  });
  afterAll(() => store.close());

  it("answers every operation 503 storage_unavailable with Retry-After", async () => {
    const things = store.collection<{ id: string; org_id: string }>("things", [{ fields: { org_id: 1 } }]);
    const tenant = { org_id: "o" };
    const unavailable = { type: "storage_unavailable", code: 503, data: { retry_after: 1 } };
    await expect(things.get(tenant, "t1")).rejects.toMatchObject(unavailable);
    await expect(things.insert({ id: "t1", org_id: "o" })).rejects.toMatchObject(unavailable);
    await expect(things.updateMany(tenant, {}, { $set: { a: 1 } })).rejects.toMatchObject(unavailable);
    await expect(store.atomically([{ op: "insert", collection: things, doc: { id: "t2", org_id: "o" } }])).rejects.toMatchObject(
      unavailable,
    );
    await expect(store.probe()).rejects.toMatchObject(unavailable);
  });

  it("lets the process start (it connects again on the next operation), and reports the failure", async () => {
    await expect(store.opened()).resolves.toBeUndefined();
    expect(warnings.join("\n")).toMatch(/MongoDB connection error/);
  });

  it("refuses a filter with an undefined value before it reaches MongoDB", async () => {
    const things = store.collection<{ id: string; org_id: string }>("things");
    await expect(things.find({ org_id: "o" }, { status: undefined as never })).rejects.toMatchObject({ type: "internal_error" });
  });

  it("closes after answering what was under way, and answers 503 afterwards", async () => {
    const things = store.collection<{ id: string; org_id: string }>("things");
    const answered = expect(things.get({ org_id: "o" }, "t1")).rejects.toMatchObject({ type: "storage_unavailable" });
    await store.close();
    await answered;
    await expect(things.get({ org_id: "o" }, "t1")).rejects.toMatchObject({ type: "service_unavailable", code: 503 });
  });
});
