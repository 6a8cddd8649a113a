/**
 * nedb updates a document in each index of its collection by removing it and inserting the new
 * version, even when the indexed value did not change (the `_id` index, on every update): two tree
 * walks and rebalances where one lookup does. This patch of nedb's Index keeps the remove-and-insert
 * path (with its unique checks and roll-back) for the documents whose indexed value changed, and for
 * the others swaps the stored reference in place — which cannot break a constraint, so it runs last,
 * after anything that can fail.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Index = require("@seald-io/nedb/lib/indexes.js") as { prototype: IndexInternals };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const model = require("@seald-io/nedb/lib/model.js") as { getDotValues(doc: unknown, fields: string[]): unknown; compareThings(a: unknown, b: unknown): number };

interface Pair {
  oldDoc: unknown;
  newDoc: unknown;
}
interface IndexInternals {
  _fields: string[];
  sparse: boolean;
  tree: { search(key: unknown): unknown[] };
  updateMultipleDocs(pairs: Pair[]): void;
  __inPlace?: true;
}

const sameKey = (index: IndexInternals, pair: Pair): unknown[] | null => {
  const before = model.getDotValues(pair.oldDoc, index._fields);
  const after = model.getDotValues(pair.newDoc, index._fields);
  // Array values index one entry per element, and a missing value may leave a sparse index: those keep nedb's path.
  if (before === undefined || Array.isArray(before) || Array.isArray(after) || model.compareThings(before, after) !== 0) return null;
  const bucket = index.tree.search(before);
  return bucket.includes(pair.oldDoc) ? bucket : null;
};

export function patchNedbIndexes(): void {
  const proto = Index.prototype;
  if (proto.__inPlace) return;
  const original = proto.updateMultipleDocs;
  proto.updateMultipleDocs = function (this: IndexInternals, pairs: Pair[]) {
    const moved: Pair[] = [];
    const kept: [unknown[], Pair][] = [];
    for (const pair of pairs) {
      const bucket = sameKey(this, pair);
      if (bucket) kept.push([bucket, pair]);
      else moved.push(pair);
    }
    if (moved.length > 0) original.call(this, moved);
    for (const [bucket, { oldDoc, newDoc }] of kept) bucket[bucket.indexOf(oldDoc)] = newDoc;
  };
  proto.__inPlace = true;
}
