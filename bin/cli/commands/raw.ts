import { jsonObject, type Command, type Ctx } from "../command";

/** Any path of the API, for what no command covers: the answer pretty-printed (or one line with --json). */
const raw = (method: "GET" | "POST" | "PATCH" | "DELETE", body: boolean): Command => ({
  args: `/PATH${body ? " [--data JSON]" : ""}`,
  summary: `${method} any path under the API's /v1 and print the answer`,
  positionals: 1,
  ...(body && { options: { data: { type: "string" } } }),
  async run(c: Ctx) {
    const path = c.positionals[0].startsWith("/") ? c.positionals[0] : `/${c.positionals[0]}`;
    const answer = await c.api().call(method, path, body ? (jsonObject(c, "data") ?? {}) : undefined);
    c.out.line(answer);
  },
});

export const RAW_COMMANDS: Record<string, Command> = {
  get: raw("GET", false),
  post: raw("POST", true),
  patch: raw("PATCH", true),
  delete: raw("DELETE", false),
};
