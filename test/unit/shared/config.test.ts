import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadSettings, SETTING_NAMES } from "../../../shared/config";

const root = join(__dirname, "../../..");

describe("loadSettings", () => {
  it("has the contract's defaults", () => {
    const s = loadSettings({});
    expect(s).toMatchObject({ port: 3000, transporter: undefined, mongoUrl: undefined, dataDir: "./data", webhookTimeoutMs: 10000 });
    expect(s.webhookRetryDelaysMs).toEqual([90000, 360000, 1440000, 5760000]);
    expect(s.services).toContain("gateway");
  });
  it("names the setting that is wrong", () => {
    expect(() => loadSettings({ PORT: "http" })).toThrow(/PORT/);
    expect(() => loadSettings({ SERVICES: "gateway,nope" })).toThrow(/SERVICES.*nope/);
    expect(() => loadSettings({ TRANSPORTER: "redis://x" })).toThrow(/TRANSPORTER/);
    expect(() => loadSettings({ WEBHOOK_RETRY_DELAYS_MS: "1,2" })).toThrow(/WEBHOOK_RETRY_DELAYS_MS/);
    expect(() => loadSettings({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "yes" })).toThrow(/WEBHOOK_ALLOW_PRIVATE_TARGETS/);
  });
  it("reads SECRETS_KEYS as ids and 32-byte keys, the current first", () => {
    const [a, b] = [Buffer.alloc(32, 1).toString("base64"), Buffer.alloc(32, 2).toString("base64")];
    expect(loadSettings({}).secretsKeys).toEqual([]);
    expect(loadSettings({ SECRETS_KEYS: `k2:${b}, k1:${a}` }).secretsKeys).toEqual([
      { id: "k2", key: b },
      { id: "k1", key: a },
    ]);
    expect(() => loadSettings({ SECRETS_KEYS: a })).toThrow(/SECRETS_KEYS.*<id>:/);
    expect(() => loadSettings({ SECRETS_KEYS: `k1:${Buffer.alloc(16).toString("base64")}` })).toThrow(
      /SECRETS_KEYS: key 'k1' is not 32 bytes/,
    );
    expect(() => loadSettings({ SECRETS_KEYS: `k1:${a},k1:${b}` })).toThrow(/SECRETS_KEYS: key id 'k1' is given twice/);
  });
});

describe("settings", () => {
  it("SETTING_NAMES is exactly what loadSettings reads", () => {
    const read = new Set<string>();
    loadSettings(new Proxy({}, { get: (_t, name) => (read.add(String(name)), undefined) }));
    expect([...read].sort()).toEqual([...SETTING_NAMES].sort());
  });

  it("the configuration table of docs/operations lists every setting", () => {
    const readme = readFileSync(join(root, "docs/operations/README.md"), "utf8");
    for (const name of SETTING_NAMES) expect({ name, listed: readme.includes(`| \`${name}\` |`) }).toEqual({ name, listed: true });
  });
});
