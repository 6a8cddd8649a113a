import { limitOf, required, type Command } from "../command";
import { table } from "../output";
import { printableJson } from "../printable.logic";

export const ORG_COMMANDS: Record<string, Command> = {
  "orgs create": {
    args: '--name "Acme"',
    summary: "create an organization with a live and a test org:admin key (on the store, no key needed)",
    details:
      'Prints {"org": {...}, "api_keys": [{"key": "svc_live_…", ...}, {"key": "svc_test_…", ...}]}.\nUses the server\'s DATA_DIR / MONGO_URL, and works while the server runs.',
    options: { name: { type: "string" } },
    local: true,
    async run(c) {
      // Loaded only here: it brings the services, which the API commands do not need.
      const { createOrg } = await import("../local.js");
      const result = await createOrg(c.settings.server, required(c, "name"));
      c.out.line(result, printableJson(result));
    },
  },
  "orgs list": {
    args: "[--limit N]",
    summary: "the organizations in the store under DATA_DIR / MONGO_URL, newest first (no key needed)",
    options: { limit: { type: "string" } },
    local: true,
    async run(c) {
      const { listOrgs } = await import("../local.js");
      const orgs = await listOrgs(c.settings.server, limitOf(c));
      if (c.out.json) for (const org of orgs) c.out.line(org);
      else c.out.line(orgs, table(orgs, ["id", "name", "created_at"]));
    },
  },
};
