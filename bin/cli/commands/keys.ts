import { limitOf, list, optional, required, seg, type Command } from "../command";
import { table } from "../output";
import { safe } from "../printable.logic";

export const KEY_COMMANDS: Record<string, Command> = {
  "keys create": {
    args: "--name NAME --scopes a:b,c:d [--environment live|test] [--expires-at ISO]",
    summary: "create an API key; its secret is printed once",
    options: { name: { type: "string" }, scopes: { type: "string" }, environment: { type: "string" }, "expires-at": { type: "string" } },
    async run(c) {
      const environment = optional(c, "environment");
      const expiresAt = optional(c, "expires-at");
      const body = {
        name: required(c, "name"),
        scopes: list(required(c, "scopes")),
        ...(environment !== undefined && { environment }),
        ...(expiresAt !== undefined && { expires_at: expiresAt }),
      };
      const { data } = await c.api().call("POST", "/api-keys", body);
      c.out.line(
        data,
        safe`${data.id}  ${data.name}  ${data.environment}  ${data.scopes.join(",")}\n${data.key}\n(the key is shown once: store it now)`,
      );
    },
  },
  "keys list": {
    args: "[--limit N]",
    summary: "the API keys of the key's organization, newest first",
    options: { limit: { type: "string" } },
    async run(c) {
      const { data } = await c.api().call<any[]>("GET", `/api-keys?limit=${limitOf(c)}`);
      if (c.out.json) for (const key of data) c.out.line(key);
      else c.out.line(data, table(data, ["id", "name", "environment", "status", "scopes", "last_used_at"]));
    },
  },
  "keys revoke": {
    args: "KEY_ID",
    summary: "revoke an API key (every gateway refuses it before answering)",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("DELETE", `/api-keys/${seg(c.positionals[0])}`);
      c.out.line(data, safe`revoked ${data.id} at ${data.revoked_at}`);
    },
  },
};
