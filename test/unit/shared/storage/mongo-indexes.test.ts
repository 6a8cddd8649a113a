import fc from "fast-check";
import { indexName, indexToCreate, planIndexes, type StoredIndex } from "../../../../shared/storage/mongo-indexes";
import type { IndexSpec } from "../../../../shared/storage/types";

const idIndex: StoredIndex = { name: "_id_", key: { _id: 1 } };

describe("MongoDB indexes, from the collections' declarations", () => {
  it("names an index by its key pattern as MongoDB does, then by its options", () => {
    expect(indexName({ fields: { org_id: 1, environment: 1, seq: -1 } })).toBe("org_id_1_environment_1_seq_-1");
    expect(indexName({ fields: { slot: 1 }, unique: true, sparse: true })).toBe("slot_1_unique_sparse");
    expect(indexName({ fields: { org_id: 1, email: 1 }, unique: true })).toBe("org_id_1_email_1_unique");
    expect(indexName({ fields: { id: 1, n: 1 } })).toBe("_id_1_n_1");
    expect(indexToCreate({ fields: { due_at: 1 }, sparse: true })).toEqual({ name: "due_at_1_sparse", key: { due_at: 1 }, sparse: true });
    expect(indexToCreate({ fields: { a: -1 } })).toEqual({ name: "a_-1", key: { a: -1 } });
  });

  it("gives specs that differ in fields, order, direction or options different names", () => {
    const spec = fc.record({
      fields: fc.dictionary(fc.constantFrom("a", "b", "org_id", "c.d"), fc.constantFrom(1 as const, -1 as const), {
        minKeys: 1,
        maxKeys: 3,
      }),
      unique: fc.boolean(),
      sparse: fc.boolean(),
    });
    const canonical = (s: IndexSpec) => JSON.stringify([Object.entries(s.fields), Boolean(s.unique), Boolean(s.sparse)]);
    fc.assert(fc.property(spec, spec, (a, b) => (canonical(a) === canonical(b)) === (indexName(a) === indexName(b))));
  });

  it("creates what is missing, and nothing that is there under its name or, with the same options, under another", () => {
    const declared: IndexSpec[] = [
      { fields: { slot: 1 }, unique: true, sparse: true },
      { fields: { org_id: 1, environment: 1, seq: 1 } },
      { fields: { due_at: 1 }, sparse: true },
    ];
    // An earlier version's index on `slot`, under MongoDB's default name, with the same options.
    const existing: StoredIndex[] = [
      idIndex,
      { name: "slot_1", key: { slot: 1 }, unique: true, sparse: true },
      { name: "org_id_1_environment_1_seq_1", key: { org_id: 1, environment: 1, seq: 1 } },
    ];
    expect(planIndexes(declared, existing)).toEqual({
      create: [{ name: "due_at_1_sparse", key: { due_at: 1 }, sparse: true }],
      conflicts: [],
      legacy: false,
    });
    expect(planIndexes(declared, [idIndex]).create.map((i) => i.name)).toEqual([
      "slot_1_unique_sparse",
      "org_id_1_environment_1_seq_1",
      "due_at_1_sparse",
    ]);
  });

  it("reports an index on the same key with other options as a conflict, and creates nothing over it", () => {
    const existing: StoredIndex[] = [idIndex, { name: "slot_1", key: { slot: 1 }, unique: true }];
    const plan = planIndexes([{ fields: { slot: 1 }, unique: true, sparse: true }], existing);
    expect(plan.create).toEqual([]);
    expect(plan.conflicts).toEqual([
      { declared: indexToCreate({ fields: { slot: 1 }, unique: true, sparse: true }), existing: existing[1] },
    ]);
  });

  it("builds an index over the documents with a field present as a partial index, a conflict with the whole one", () => {
    const partial: IndexSpec = { fields: { org_id: 1, environment: 1, due_at: 1 }, present: "due_at" };
    expect(indexToCreate(partial)).toEqual({
      name: "org_id_1_environment_1_due_at_1_with_due_at",
      key: { org_id: 1, environment: 1, due_at: 1 },
      partialFilterExpression: { due_at: { $exists: true } },
    });
    const built: StoredIndex = { ...indexToCreate(partial), name: "made_by_hand" };
    expect(planIndexes([partial], [idIndex, built])).toEqual({ create: [], conflicts: [], legacy: false });
    const whole: StoredIndex = { name: "org_id_1_environment_1_due_at_1", key: { org_id: 1, environment: 1, due_at: 1 } };
    expect(planIndexes([partial], [idIndex, whole]).conflicts).toEqual([{ declared: indexToCreate(partial), existing: whole }]);
  });

  it("never creates the `_id` index, which MongoDB keeps itself", () => {
    expect(planIndexes([{ fields: { id: 1 }, unique: true }], []).create).toEqual([]);
  });

  it("recognises a collection of the earlier layout by its unique `id` index", () => {
    expect(planIndexes([], [idIndex, { name: "id_1", key: { id: 1 }, unique: true }]).legacy).toBe(true);
    expect(planIndexes([], [idIndex, { name: "id_1", key: { id: 1 } }]).legacy).toBe(false);
  });
});
