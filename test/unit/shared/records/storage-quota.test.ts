import fc from "fast-check";
import type { ServiceSchema } from "moleculer";
import { SERVICE_SCHEMAS } from "../../../../services";
import {
  measureFields,
  sizeChangeOf,
  STORAGE_COUNTING_SERVICES,
  STORAGE_POLICIES,
  storedSize,
  tenantOf,
  volatileOnly,
} from "../../../../shared/records/storage-quota";
import { declarationOf } from "../../../../shared/runtime/store.mixin";
import { applyUpdate } from "../../../../shared/storage/update";

const VOLATILE = ["due_at", "lease"] as const;
const plain = fc.dictionary(
  fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !VOLATILE.includes(k as never) && k !== "__proto__"),
  fc.jsonValue({ maxDepth: 2 }),
  { maxKeys: 6 },
);

/** Top-level fields as services write them: identifiers. */
const field = fc.stringMatching(/^[a-z_][a-z0-9_]{0,7}$/).filter((k) => k !== "__proto__");
const fields = fc.dictionary(fc.oneof(field, fc.constantFrom(...VOLATILE)), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 6 });

describe("measureFields and sizeChangeOf", () => {
  it("measure a document as storedSize does", () => {
    fc.assert(
      fc.property(fields, (doc) => {
        expect(measureFields({ id: "x", ...doc }, VOLATILE).size).toBe(storedSize({ id: "x", ...doc }, VOLATILE));
      }),
    );
  });

  it("answer what an update of whole fields changes, as measuring the document after it does", () => {
    const update = fc.record({
      $set: fields,
      $unset: fc.dictionary(fc.oneof(field, fc.constantFrom(...VOLATILE)), fc.constant(true as const), { maxKeys: 3 }),
    });
    fc.assert(
      fc.property(fields, update, (doc, { $set, $unset }) => {
        const before = { id: "x", ...doc };
        const clean = { $set, $unset: Object.fromEntries(Object.entries($unset).filter(([k]) => !(k in $set))) };
        const measured = measureFields(before, VOLATILE);
        const change = sizeChangeOf(measured.fields, clean, VOLATILE);
        const after = applyUpdate(structuredClone(before), clean);
        expect(change).not.toBeNull();
        expect(measured.size + change!.delta).toBe(storedSize(after, VOLATILE));
        expect(change!.fields).toEqual(measureFields(after, VOLATILE).fields);
      }),
    );
  });

  it("answer null for an update that writes inside a field or increments", () => {
    const { fields: sizes } = measureFields({ id: "x", steps: [{ status: "running" }], n: 1 }, []);
    expect(sizeChangeOf(sizes, { $set: { "steps.0.status": "succeeded" } }, [])).toBeNull();
    expect(sizeChangeOf(sizes, { $inc: { n: 1 } }, [])).toBeNull();
    expect(sizeChangeOf(sizes, { $push: { steps: {} } }, [])).toBeNull();
  });
});

describe("storedSize", () => {
  it("is the JSON length of a document without volatile fields", () => {
    expect(storedSize({ id: "a", n: 1 }, [])).toBe(JSON.stringify({ id: "a", n: 1 }).length);
    fc.assert(
      fc.property(plain, fc.option(fc.integer()), fc.option(fc.uuid()), (doc, due, lease) => {
        const full = { id: "x", ...doc, ...(due !== null && { due_at: due }), ...(lease !== null && { lease }) };
        expect(storedSize(full, VOLATILE)).toBe(JSON.stringify({ id: "x", ...doc }).length);
      }),
    );
  });

  it("does not depend on the order of a document's keys (a document read back measures as written)", () => {
    fc.assert(
      fc.property(plain, (doc) => {
        const reversed = Object.fromEntries(Object.entries(doc).reverse());
        expect(storedSize({ id: "x", ...reversed }, VOLATILE)).toBe(storedSize({ id: "x", ...doc }, VOLATILE));
      }),
    );
  });

  it("of an update that touches only volatile fields, is unchanged", () => {
    fc.assert(
      fc.property(plain, fc.integer(), fc.uuid(), (doc, due, lease) => {
        const update = { $set: { due_at: due, lease } };
        expect(volatileOnly(update, VOLATILE)).toBe(true);
        const before = { id: "x", ...doc };
        expect(storedSize(applyUpdate(structuredClone(before), update), VOLATILE)).toBe(storedSize(before, VOLATILE));
      }),
    );
  });
});

describe("volatileOnly", () => {
  it("is false for any update of another field, and where nothing is volatile", () => {
    expect(volatileOnly({ $set: { due_at: 1, status: "x" } }, VOLATILE)).toBe(false);
    expect(volatileOnly({ $inc: { attempts: 1 } }, VOLATILE)).toBe(false);
    expect(volatileOnly({ $unset: { lease: true } }, VOLATILE)).toBe(true);
    expect(volatileOnly({ $set: { a: 1 } }, [])).toBe(false);
  });
});

describe("tenantOf", () => {
  it("is the organization and environment; organization-wide documents count as live; no organization, none", () => {
    expect(tenantOf({ org_id: "org_1", environment: "test" })).toEqual({ org_id: "org_1", environment: "test" });
    expect(tenantOf({ org_id: "org_1" })).toEqual({ org_id: "org_1", environment: "live" });
    expect(tenantOf({ id: "platform" })).toBeNull();
  });
});

describe("STORAGE_POLICIES", () => {
  it("checks what the API creates and only counts what the platform records of it", () => {
    const checked = Object.entries(STORAGE_POLICIES)
      .filter(([, p]) => p.checked)
      .map(([n]) => n)
      .sort();
    expect(checked).toEqual(["api_keys", "events", "members", "webhooks", "workflow_secrets", "workflow_versions", "workflows"]);
  });
});

describe("STORAGE_COUNTING_SERVICES", () => {
  it("are exactly the services that own a counted collection", () => {
    const owning = Object.entries(SERVICE_SCHEMAS)
      .filter(([, schema]) => (declarationOf(schema as Partial<ServiceSchema>)?.owns ?? []).some((c) => c in STORAGE_POLICIES))
      .map(([name]) => name)
      .sort();
    expect(owning).toEqual([...STORAGE_COUNTING_SERVICES].sort());
  });
});
