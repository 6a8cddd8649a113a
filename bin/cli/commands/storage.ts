import { liveServers } from "../../server-mark";
import type { Command } from "../command";
import { table } from "../output";
import type { ServiceRecount } from "../../../shared/runtime/storage-recount";
import { difference, type CounterFix } from "../../../shared/runtime/storage-recount.logic";

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
  return `${head}${what}\n${table(rows, ["tenant", "before", "after", "difference"])
    .split("\n")
    .map((l) => `  ${l}`)
    .join("\n")}`;
}

export const STORAGE_COMMANDS: Record<string, Command> = {
  "storage recount": {
    args: "[--dry-run]",
    summary: "set the storage quota's counters to what the stored documents measure (platform stopped)",
    details: [
      "Run it with the platform stopped, after an upgrade from a version without the storage quota, or",
      "after a crash: reads every counted collection in batches, sums each tenant's documents per service,",
      "and sets each counter row to its sum (creating rows, removing those of tenants with nothing left).",
      "Refuses while a server uses DATA_DIR; with MONGO_URL it cannot tell, so stop every node first.",
      "  --dry-run          print what would change, change nothing",
    ].join("\n"),
    options: { "dry-run": { type: "boolean" } },
    async run(c) {
      const running = liveServers(c.settings.server);
      if (running !== null && running > 0)
        throw new Error(
          `${running} server(s) use DATA_DIR=${c.settings.server.dataDir}: stop the platform first (a recount beside running services would be overwritten by their writes)`,
        );
      if (running === null) c.out.warn("with MONGO_URL the CLI cannot tell whether the platform runs: every node must be stopped");
      const dryRun = c.values["dry-run"] === true;
      const { recountStorage } = await import("../local.js");
      const results = await recountStorage(c.settings.server, dryRun);
      for (const r of results) {
        const { fixes, ...rest } = r;
        c.out.line({ ...rest, dry_run: dryRun, changed: fixes.map(change) }, describe(r, dryRun));
      }
      const now = liveServers(c.settings.server);
      if (now !== null && now > 0) {
        c.out.warn("a server started during the recount: its writes may not be in the counters; stop it and run the recount again");
        return 1;
      }
    },
  },
};
