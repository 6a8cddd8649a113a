import type { IndexSpec } from "./types";
import { storedPath } from "./mongo-docs";

/** An index as MongoDB's listIndexes describes it (the fields used here). */
export interface StoredIndex {
  name: string;
  key: Record<string, number>;
  unique?: boolean;
  sparse?: boolean;
  partialFilterExpression?: unknown;
}

/** An index to create, as createIndexes takes it. */
export interface IndexToCreate {
  name: string;
  key: Record<string, 1 | -1>;
  unique?: true;
  sparse?: true;
  partialFilterExpression?: Record<string, { $exists: true }>;
}

export const indexKey = (spec: IndexSpec): Record<string, 1 | -1> =>
  Object.fromEntries(Object.entries(spec.fields).map(([field, dir]) => [storedPath(field), dir < 0 ? -1 : 1]));

/**
 * The name of an index, derived from its spec: MongoDB's default name for the key pattern
 * (`org_id_1_email_1`), then `_unique` and `_sparse` for its options. So the same declaration makes
 * the same name on every node, an index declared with other options is another name (never an
 * IndexKeySpecsConflict at every operation), and an index made by an earlier version under the
 * default name, with the same options, is recognised by its key and options.
 */
export function indexName(spec: IndexSpec): string {
  const key = Object.entries(indexKey(spec))
    .map(([field, dir]) => `${field}_${dir}`)
    .join("_");
  const present = spec.present === undefined ? "" : `_with_${storedPath(spec.present)}`;
  return `${key}${spec.unique ? "_unique" : ""}${spec.sparse ? "_sparse" : ""}${present}`;
}

/** The partial filter of an index over the documents with a field present. */
const partialOf = (spec: IndexSpec) =>
  spec.present === undefined ? undefined : { [storedPath(spec.present)]: { $exists: true as const } };

export function indexToCreate(spec: IndexSpec): IndexToCreate {
  const partial = partialOf(spec);
  return {
    name: indexName(spec),
    key: indexKey(spec),
    ...(spec.unique && { unique: true }),
    ...(spec.sparse && { sparse: true }),
    ...(partial && { partialFilterExpression: partial }),
  };
}

const sameKey = (a: Record<string, number>, b: Record<string, number>): boolean =>
  JSON.stringify(Object.entries(a).map(([f, d]) => [f, d < 0 ? -1 : 1])) ===
  JSON.stringify(Object.entries(b).map(([f, d]) => [f, d < 0 ? -1 : 1]));

const sameOptions = (spec: IndexSpec, index: StoredIndex): boolean =>
  Boolean(spec.unique) === Boolean(index.unique) &&
  Boolean(spec.sparse) === Boolean(index.sparse) &&
  JSON.stringify(partialOf(spec)) === JSON.stringify(index.partialFilterExpression);

export interface IndexPlan {
  /** Declared and not there yet. */
  create: IndexToCreate[];
  /** Declared, but an index on the same key with other options is there: MongoDB refuses a second one. */
  conflicts: { declared: IndexToCreate; existing: StoredIndex }[];
  /**
   * The collection holds documents of the earlier layout (an ObjectId `_id` and a unique `id`
   * index): they are not found by their id until migrated (docs/operations/mongodb.md).
   */
  legacy: boolean;
}

/** What to do about a collection's declared indexes, given those it has. */
export function planIndexes(declared: IndexSpec[], existing: StoredIndex[]): IndexPlan {
  const plan: IndexPlan = { create: [], conflicts: [], legacy: existing.some((i) => sameKey(i.key, { id: 1 }) && i.unique === true) };
  const seen = new Set<string>();
  for (const spec of declared) {
    const wanted = indexToCreate(spec);
    // The `_id` index is MongoDB's own, always there and unique.
    if (sameKey(wanted.key, { _id: 1 }) || seen.has(wanted.name)) continue;
    seen.add(wanted.name);
    const sameFields = existing.filter((i) => sameKey(i.key, wanted.key));
    if (sameFields.some((i) => i.name === wanted.name || sameOptions(spec, i))) continue;
    if (sameFields.length > 0) plan.conflicts.push({ declared: wanted, existing: sameFields[0] });
    else plan.create.push(wanted);
  }
  return plan;
}

const describe = (i: { unique?: boolean; sparse?: boolean; partialFilterExpression?: unknown }): string =>
  [i.unique ? "unique" : "not unique", i.sparse ? "sparse" : "not sparse", ...(i.partialFilterExpression ? ["partial"] : [])].join(", ");

/** What an operator reads about a conflict, and how to resolve it. */
export const conflictMessage = (collection: string, c: IndexPlan["conflicts"][number]): string =>
  `storage: MongoDB collection '${collection}' has index '${c.existing.name}' (${describe(c.existing)}) on the fields of ` +
  `the declared index '${c.declared.name}' (${describe(c.declared)}), which is therefore not built; the collection works ` +
  `with the index it has. To build the declared one: db.${collection}.dropIndex("${c.existing.name}"), then restart a node.`;

export const buildFailureMessage = (collection: string, indexes: IndexToCreate[], err: unknown): string => {
  const code = (err as { code?: unknown } | null)?.code;
  const why =
    code === 11000
      ? "documents already stored hold the same values of a unique index; remove the duplicates, then restart a node"
      : `MongoDB answered: ${(err as Error | null)?.message ?? String(err)}`;
  return `storage: MongoDB collection '${collection}': the indexes ${indexes.map((i) => `'${i.name}'`).join(", ")} were not built (${why}). Reads and writes go on without them.`;
};

export const legacyMessage = (collection: string): string =>
  `storage: MongoDB collection '${collection}' holds documents written by an earlier version (an ObjectId _id beside a ` +
  `unique 'id' index), which this version does not find by their id. Migrate them first: see docs/operations/mongodb.md ` +
  `("Documents of an earlier version").`;
