import type { Output } from "./output";
import { table } from "./output";
import type { ServiceRecount } from "../../shared/runtime/storage-recount";
import { difference, type CounterFix } from "../../shared/runtime/storage-recount.logic";

/** A fix as printed: a malformed count shows as null. */
const change = (fix: CounterFix) => ({
  org_id: fix.org_id,
  environment: fix.environment,
  before: fix.before === null || Number.isNaN(fix.before) ? null : fix.before,
  after: fix.after,
  difference: difference(fix),
});

function describe(r: ServiceRecount, dryRun: boolean): string {
  const head = `${r.service}: ${r.documents} documents in ${r.collections.join(", ")}; `;
  if (r.fixes.length === 0) return `${head}${r.counters}: nothing to change`;
  const rows = r.fixes.map(change).map((c) => ({
    tenant: `${c.org_id} ${c.environment}`,
    before: c.before ?? "(none)",
    after: c.after ?? "(removed)",
    difference: c.difference > 0 ? `+${c.difference}` : String(c.difference),
  }));
  const what = `${r.fixes.length} tenant(s) ${dryRun ? "would change" : "changed"} in ${r.counters}`;
  const lines = table(rows, ["tenant", "before", "after", "difference"]).split("\n");
  return `${head}${what}\n${lines.map((l) => `  ${l}`).join("\n")}`;
}

/** One line (or object, with --json) per service: the tenants changed and the difference. */
export function printRecount(out: Output, results: readonly ServiceRecount[], dryRun: boolean): void {
  for (const r of results) {
    const { fixes, ...rest } = r;
    out.line({ ...rest, dry_run: dryRun, changed: fixes.map(change) }, describe(r, dryRun));
  }
}
