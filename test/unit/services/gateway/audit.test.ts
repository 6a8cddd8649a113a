import type { AuditRecord } from "../../../../shared/records/audit";
import { AuditWriter, auditedResource } from "../../../../services/gateway/audit";

const entry = (id: string) => ({ id }) as AuditRecord;

describe("AuditWriter (group commit)", () => {
  it("writes concurrent entries together: one write for those that came in while the previous one ran", async () => {
    const writes: string[][] = [];
    let release: () => void = () => undefined;
    const writer = new AuditWriter(async (entries) => {
      writes.push(entries.map((e) => e.id));
      // The first write waits until the test lets it go: what comes in meanwhile forms the next batch.
      if (writes.length === 1) await new Promise<void>((ok) => (release = ok));
    });
    const first = [writer.record(entry("a")), writer.record(entry("b"))];
    await new Promise((ok) => setImmediate(ok));
    expect(writes).toEqual([["a", "b"]]);
    const later = ["c", "d", "e"].map((id) => writer.record(entry(id)));
    expect(writer.waiting).toBe(3);
    release();
    await Promise.all([...first, ...later]);
    expect(writes).toEqual([
      ["a", "b"],
      ["c", "d", "e"],
    ]);
  });

  it("tries a failed write again, and rejects every entry of a batch whose write failed each time", async () => {
    let calls = 0;
    const flaky = new AuditWriter(async () => {
      calls += 1;
      if (calls === 1) throw new Error("blip");
    });
    await expect(flaky.record(entry("a"))).resolves.toBeUndefined();
    expect(calls).toBe(2);

    const down = new AuditWriter(async () => {
      throw new Error("store down");
    });
    const results = await Promise.allSettled([down.record(entry("x")), down.record(entry("y"))]);
    expect(results.map((r) => (r.status === "rejected" ? (r.reason as Error).message : "stored"))).toEqual(["store down", "store down"]);
    // The writer goes on after a failure.
    const ok = new AuditWriter(async () => undefined);
    await expect(ok.record(entry("z"))).resolves.toBeUndefined();
  });
});

describe("auditedResource", () => {
  const answer = { id: "wh_1", name: "TOKEN", secret: "whsec_never" };
  it("takes the named answer field, else the path's last parameter, else the answer's id; never anything else", () => {
    expect(auditedResource({ action: "secret.stored", id: "name" }, {}, answer)).toEqual({ type: "secret", id: "TOKEN" });
    expect(auditedResource({ action: "run.approved" }, { id: "wf_1", run_id: "run_2" }, answer)).toEqual({ type: "run", id: "run_2" });
    expect(auditedResource({ action: "webhook.created" }, {}, answer)).toEqual({ type: "webhook", id: "wh_1" });
    expect(auditedResource({ action: "webhook.created" }, {}, { id: 5 })).toEqual({ type: "webhook", id: null });
  });
});
