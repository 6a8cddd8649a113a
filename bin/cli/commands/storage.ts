import { liveServers } from "../../server-mark";
import type { Command } from "../command";

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
      // Loaded only here: they bring the services and the store, which the other commands do not need.
      const [{ recountStorage }, { printRecount }] = await Promise.all([import("../local.js"), import("../recount.js")]);
      printRecount(c.out, await recountStorage(c.settings.server, dryRun), dryRun);
      const now = liveServers(c.settings.server);
      if (now !== null && now > 0) {
        c.out.warn("a server started during the recount: its writes may not be in the counters; stop it and run the recount again");
        return 1;
      }
    },
  },
};
