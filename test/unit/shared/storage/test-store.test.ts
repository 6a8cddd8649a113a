import { testStore, withDatabase } from "../../../helpers/platform";

describe("the store the API suites run on", () => {
  const saved = { store: process.env.WFP_TEST_STORE, url: process.env.MONGO_URL };
  afterEach(() => {
    for (const [key, value] of [
      ["WFP_TEST_STORE", saved.store],
      ["MONGO_URL", saved.url],
    ] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  });

  it("puts a database of its own into any MONGO_URL, keeping hosts and options", () => {
    expect(withDatabase("mongodb://127.0.0.1:27017/?replicaSet=rs0&directConnection=true", "db1")).toBe(
      "mongodb://127.0.0.1:27017/db1?replicaSet=rs0&directConnection=true",
    );
    expect(withDatabase("mongodb://mongo:27017/wfp?replicaSet=rs0", "db1")).toBe("mongodb://mongo:27017/db1?replicaSet=rs0");
    expect(withDatabase("mongodb://u:p@a:1,b:2,c:3/wfp", "db1")).toBe("mongodb://u:p@a:1,b:2,c:3/db1");
    expect(withDatabase("mongodb+srv://cluster.example.net", "db1")).toBe("mongodb+srv://cluster.example.net/db1");
  });

  it("is the embedded store unless the run is test:mongo, whatever MONGO_URL says", () => {
    process.env.MONGO_URL = "mongodb://127.0.0.1:27017/?replicaSet=rs0";
    delete process.env.WFP_TEST_STORE;
    expect(testStore("/tmp/a")).toEqual({});
  });

  it("under test:mongo, is one database per DATA_DIR, the same again for the same DATA_DIR", () => {
    process.env.MONGO_URL = "mongodb://127.0.0.1:27017/?replicaSet=rs0";
    process.env.WFP_TEST_STORE = "mongo";
    const a = testStore("/tmp/a").MONGO_URL;
    expect(a).toMatch(/^mongodb:\/\/127\.0\.0\.1:27017\/wfp_test_[0-9a-f]{20}\?replicaSet=rs0$/);
    expect(testStore("/tmp/a").MONGO_URL).toBe(a);
    expect(testStore("/tmp/b").MONGO_URL).not.toBe(a);
    delete process.env.MONGO_URL;
    expect(() => testStore("/tmp/a")).toThrow(/needs MONGO_URL/);
  });
});
