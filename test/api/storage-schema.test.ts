import { existsSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { DATABASE_FILE } from "../../shared/storage/sqlite";
import { api, expectError, startPlatform, type Platform, type TestOrg } from "../helpers/platform";
import { fillDisk, mountTmpfs } from "../helpers/tmpfs";

/**
 * A full disk never fails a read (issue 29): every collection's schema is applied when its service
 * starts, so no read waits on a write of it later. On a real small tmpfs: a platform whose tenant
 * has written almost nothing (most collections never used), then the disk filled; every list the
 * API has answers 200, on the running platform and on one started on the full disk, while writes
 * answer 503.
 */
const fs = mountTmpfs("16m", "schema");
if (fs.skipReason) console.warn(`SKIPPED test/api/storage-schema.test.ts: ${fs.skipReason}`);
const DATA_DIR = join(fs.dir, "data");
const FILLER = join(fs.dir, "filler");

(fs.skipReason ? describe.skip : describe)("reads on a full disk (tmpfs)", () => {
  let p: Platform | undefined;
  let acme: TestOrg;
  let db: DatabaseSync | undefined;

  const call = (method: string, path: string, body?: unknown) => api((p as Platform).baseUrl, method, path, { key: acme.live, body });
  const reads = () => [
    "/webhooks",
    `/orgs/${acme.org.id}/members`,
    "/secrets",
    "/analytics/usage",
    "/analytics/workflows",
    "/analytics/webhooks",
    "/api-keys",
    "/events",
    "/events/types",
    "/workflows",
    "/runs",
    "/audit-log",
  ];
  async function expectReadsServed(): Promise<void> {
    for (const path of reads()) {
      const res = await call("GET", path);
      expect({ path, status: res.status, body: res.status === 200 ? "" : res.body }).toEqual({ path, status: 200, body: "" });
    }
  }

  beforeAll(async () => {
    p = await startPlatform({ DATA_DIR });
    acme = await p.createOrg("Acme");
    db = new DatabaseSync(join(DATA_DIR, DATABASE_FILE), { timeout: 2000 });
  }, 20_000);

  afterAll(async () => {
    if (existsSync(FILLER)) unlinkSync(FILLER);
    if (db?.isOpen) db.close();
    await p?.stop();
    fs.unmount();
  }, 20_000);

  it("the running platform serves every list once the disk is full, and refuses writes with 503", async () => {
    fillDisk(db as DatabaseSync, DATA_DIR, FILLER);
    expectError(await call("POST", "/events", { type: "disk.full", data: {} }), 503, "storage_unavailable");
    await expectReadsServed();
  }, 20_000);

  it("a platform started on the full disk serves every list", async () => {
    (db as DatabaseSync).close();
    await (p as Platform).stop();
    p = undefined;
    p = await startPlatform({ DATA_DIR });
    expect(existsSync(FILLER)).toBe(true);
    expectError(await call("POST", "/api-keys", { name: "refused", scopes: ["events:read"] }), 503, "storage_unavailable");
    await expectReadsServed();
  }, 20_000);
});
