import { parseArgs, type ParseArgsConfig } from "node:util";
import { SettingsError } from "../../shared/config";
import { liveServers } from "../server-mark";
import { apiClient, ApiCallError, type Api } from "./http";
import { listen } from "./listen";
import { output, table, type Output } from "./output";
import { loadCliSettings, type CliSettings } from "./settings";
import { tailDeliveries, tailEvents } from "./tail";
import { triggerEvent } from "./trigger";

type Options = NonNullable<ParseArgsConfig["options"]>;
type Values = Record<string, string | boolean | undefined>;

interface Ctx {
  values: Values;
  positionals: string[];
  settings: CliSettings;
  out: Output;
  api: () => Api;
}

interface Command {
  /** `cli <name> …` as the usage line writes it, after the command's name. */
  args: string;
  summary: string;
  /** Lines on the options, below the usage line. */
  details?: string;
  options?: Options;
  positionals?: number;
  /** Works on the store under DATA_DIR (warns when no server uses it), not through the API. */
  local?: true;
  run(c: Ctx): Promise<number | void>;
}

const GLOBAL_OPTIONS: Options = {
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  "api-url": { type: "string" },
  "api-key": { type: "string" },
};
const GLOBAL_HELP = `Options of every command:
  --json             one JSON object per line on stdout, for scripts
  --api-url URL      the API (env API_URL; default http://127.0.0.1:$PORT/v1, the server's PORT)
  --api-key KEY      the API key (env API_KEY); commands run in its organization and environment
  -h, --help         this help`;

const PROGRAM = "npm run --silent cli --";

const required = (c: Ctx, name: string): string => {
  const value = c.values[name];
  if (typeof value !== "string" || value.trim() === "") throw new UsageError(`--${name} is required`);
  return value.trim();
};
const list = (raw: string) =>
  raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
const limitOf = (c: Ctx): number => {
  const raw = (c.values.limit as string | undefined) ?? "100";
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 100) throw new UsageError("--limit must be a whole number from 1 to 100");
  return Number(raw);
};

class UsageError extends Error {}

const COMMANDS: Record<string, Command> = {
  "orgs create": {
    args: '--name "Acme"',
    summary: "create an organization with a live and a test org:admin key (on the store, no key needed)",
    details:
      'Prints {"org": {...}, "api_keys": [{"key": "svc_live_…", ...}, {"key": "svc_test_…", ...}]}.\nUses the server\'s DATA_DIR / MONGO_URL, and works while the server runs.',
    options: { name: { type: "string" } },
    local: true,
    async run(c) {
      // Loaded only here: it brings the services, which the API commands do not need.
      const { createOrg } = await import("./local.js");
      const result = await createOrg(c.settings.server, required(c, "name"));
      process.stdout.write(`${JSON.stringify(result)}\n`);
    },
  },
  "orgs list": {
    args: "[--limit N]",
    summary: "the organizations in the store under DATA_DIR / MONGO_URL, newest first (no key needed)",
    options: { limit: { type: "string" } },
    local: true,
    async run(c) {
      const { listOrgs } = await import("./local.js");
      const orgs = await listOrgs(c.settings.server, limitOf(c));
      if (c.out.json) for (const org of orgs) c.out.line(org);
      else c.out.line(orgs, table(orgs, ["id", "name", "created_at"]));
    },
  },
  "keys create": {
    args: "--name NAME --scopes a:b,c:d [--environment live|test] [--expires-at ISO]",
    summary: "create an API key; its secret is printed once",
    options: { name: { type: "string" }, scopes: { type: "string" }, environment: { type: "string" }, "expires-at": { type: "string" } },
    async run(c) {
      const body = {
        name: required(c, "name"),
        scopes: list(required(c, "scopes")),
        ...(c.values.environment !== undefined && { environment: c.values.environment }),
        ...(c.values["expires-at"] !== undefined && { expires_at: c.values["expires-at"] }),
      };
      const { data } = await c.api().call("POST", "/api-keys", body);
      c.out.line(data, `${data.id}  ${data.environment}  ${data.scopes.join(",")}\n${data.key}\n(the key is shown once: store it now)`);
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
      const { data } = await c.api().call("DELETE", `/api-keys/${encodeURIComponent(c.positionals[0])}`);
      c.out.line(data, `revoked ${data.id} at ${data.revoked_at}`);
    },
  },
  "webhooks list": {
    args: "[--limit N]",
    summary: "the webhooks of the key's environment",
    options: { limit: { type: "string" } },
    async run(c) {
      const { data } = await c.api().call<any[]>("GET", `/webhooks?limit=${limitOf(c)}`);
      if (c.out.json) for (const hook of data) c.out.line(hook);
      else c.out.line(data, table(data, ["id", "url", "events", "status"]));
    },
  },
  "webhooks create": {
    args: "--url URL --events a.b,c.d [--description TEXT]",
    summary: "register a webhook; its signing secret is printed once",
    options: { url: { type: "string" }, events: { type: "string" }, description: { type: "string" } },
    async run(c) {
      const body = {
        url: required(c, "url"),
        events: list(required(c, "events")),
        ...(c.values.description !== undefined && { description: c.values.description }),
      };
      const { data } = await c.api().call("POST", "/webhooks", body);
      c.out.line(data, `${data.id}  ${data.url}  ${data.events.join(",")}\nsigning secret: ${data.secret} (shown once)`);
    },
  },
  "webhooks test": {
    args: "WEBHOOK_ID [--type a.b] [--timeout-ms N]",
    summary: "emit a test event the webhook subscribes to and wait for its first attempt",
    details: "The event's data is {\"test\": true}; the type is --type, else the webhook's first type (cli.test for '*').",
    options: { type: { type: "string" }, "timeout-ms": { type: "string" } },
    positionals: 1,
    async run(c) {
      const api = c.api();
      const id = encodeURIComponent(c.positionals[0]);
      const { data: hook } = await api.call("GET", `/webhooks/${id}`);
      const type = (c.values.type as string | undefined) ?? (hook.events[0] === "*" ? "cli.test" : hook.events[0]);
      const { data: event } = await api.call("POST", "/events", { type, data: { test: true, source: "cli webhooks test" } });
      const until = Date.now() + Number(c.values["timeout-ms"] ?? 30_000);
      for (;;) {
        const { data: deliveries } = await api.call<any[]>("GET", `/webhooks/${id}/deliveries?limit=20`);
        const delivery = deliveries.find((d) => d.event_id === event.id && d.attempts.length > 0);
        if (delivery) {
          // The first attempt decides, even if a retry has already followed it.
          const first = delivery.attempts[0];
          c.out.line(
            delivery,
            `${delivery.id} ${type}: attempt ${first.number} → ${first.status_code ?? "no answer"} (${first.duration_ms} ms)${first.error ? ` ${first.error}` : ""}`,
          );
          return first.status_code !== null && first.status_code < 300 ? 0 : 1;
        }
        if (Date.now() > until) throw new Error(`no attempt for event ${event.id} within the time-out`);
        await new Promise((r) => setTimeout(r, 250));
      }
    },
  },
  trigger: {
    args: "TYPE [--data JSON]",
    summary: "emit an event through the API; system types (api_key.*) are produced by fixtures",
    details:
      "A client type (order.created) is emitted with --data (a JSON object; default {}).\nA system type cannot be emitted by clients: the CLI makes it happen instead, as a fixture\n(api_key.created, api_key.revoked: a key named 'cli trigger fixture' is created and revoked at once).",
    options: { data: { type: "string" } },
    positionals: 1,
    async run(c) {
      let data: unknown = {};
      if (c.values.data !== undefined) {
        try {
          data = JSON.parse(c.values.data as string);
        } catch {
          throw new UsageError("--data must be JSON");
        }
        if (data === null || typeof data !== "object" || Array.isArray(data)) throw new UsageError("--data must be a JSON object");
      }
      const type = c.positionals[0];
      const result = await triggerEvent(c.api(), type, data as Record<string, unknown>);
      if (result === null) throw new UsageError(`'${type}' is a system type with no fixture; fixtures: api_key.created, api_key.revoked`);
      c.out.line(result, result.fixture ? `${type}: fixture ran (${result.note})` : `emitted ${result.event.id} ${type}`);
    },
  },
  "events tail": {
    args: "[--type a.b]",
    summary: "print new events of the key's environment as they are stored (until Ctrl-C)",
    options: { type: { type: "string" } },
    async run(c) {
      await tailEvents(c.api(), c.out, c.values.type as string | undefined);
    },
  },
  "deliveries tail": {
    args: "[--webhook WEBHOOK_ID]… [--listener SESSION_ID]",
    summary: "print new delivery attempts as they happen (every webhook's by default; until Ctrl-C)",
    options: { webhook: { type: "string", multiple: true }, listener: { type: "string" } } as unknown as Options,
    async run(c) {
      await tailDeliveries(
        c.api(),
        c.out,
        (c.values.webhook as unknown as string[] | undefined) ?? [],
        c.values.listener as string | undefined,
      );
    },
  },
  listen: {
    args: "--forward-to http://localhost:PORT/path [--events a.b,c.*] [--timeout-ms N]",
    summary: "receive the platform's events as signed deliveries and forward them to a local URL",
    details:
      "Prints the session's signing secret first (verify with the Standard Webhooks libraries);\neach local answer (status, time, the body's first 1 KiB) goes to the delivery log:\nGET /v1/listen/{session}/deliveries, or deliveries tail --listener SESSION.",
    options: { "forward-to": { type: "string" }, events: { type: "string" }, "timeout-ms": { type: "string" } },
    async run(c) {
      const forwardTo = required(c, "forward-to");
      if (!/^https?:\/\/\S+$/.test(forwardTo)) throw new UsageError("--forward-to must be an http(s) URL");
      const timeoutMs = Number(c.values["timeout-ms"] ?? 10_000);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new UsageError("--timeout-ms must be a whole number of ms");
      await listen(c.api(), c.out, { forwardTo, events: c.values.events as string | undefined, timeoutMs });
    },
  },
};

const usageOf = (name: string, cmd: Command) =>
  `Usage: ${PROGRAM} ${name} ${cmd.args}\n\n${cmd.summary[0].toUpperCase()}${cmd.summary.slice(1)}.${cmd.details ? `\n${cmd.details}` : ""}\n\n${GLOBAL_HELP}`;

function overview(nouns?: string): string {
  const names = Object.keys(COMMANDS).filter((n) => nouns === undefined || n.startsWith(`${nouns} `));
  const width = Math.max(...names.map((n) => n.length));
  return `Usage: ${PROGRAM} <command> [options]\n\nCommands:\n${names.map((n) => `  ${n.padEnd(width)}  ${COMMANDS[n].summary}`).join("\n")}\n\n${GLOBAL_HELP}\nRun '${PROGRAM} <command> --help' for a command's options.`;
}

/** The closest command name, for the hint after a typo. */
function closest(words: string): string | undefined {
  const distance = (a: string, b: string) => {
    const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) d[0][j] = j;
    for (let i = 1; i <= a.length; i++)
      for (let j = 1; j <= b.length; j++)
        d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    return d[a.length][b.length];
  };
  const [best] = Object.keys(COMMANDS)
    .map((n) => ({ n, d: distance(words, n) }))
    .sort((x, y) => x.d - y.d);
  return best && best.d <= Math.max(2, Math.floor(words.length / 3)) ? best.n : undefined;
}

const say = (stream: NodeJS.WriteStream, text: string) => stream.write(`${text}\n`);

/** Runs one command line; answers the exit code. */
export async function main(argv: string[]): Promise<number> {
  const words = argv.filter((a) => !a.startsWith("-"));
  const wantsHelp = argv.includes("--help") || argv.includes("-h");
  const name = [`${words[0]} ${words[1]}`, words[0]].find((n) => n !== undefined && COMMANDS[n] !== undefined);
  if (!name) {
    if (words[0] === "help" || (words.length === 0 && wantsHelp)) return (say(process.stdout, overview()), 0);
    if (words.length === 0) return (say(process.stderr, overview()), 2);
    const nouns = Object.keys(COMMANDS).some((n) => n.startsWith(`${words[0]} `)) ? words[0] : undefined;
    if (nouns !== undefined && words.length === 1) {
      if (wantsHelp) return (say(process.stdout, overview(nouns)), 0);
      return (say(process.stderr, `'${nouns}' needs a command.\n\n${overview(nouns)}`), 2);
    }
    const typed = words.slice(0, 2).join(" ");
    const hint = closest(typed) ?? closest(words[0]);
    say(process.stderr, `Unknown command '${typed}'.${hint ? ` Did you mean '${hint}'?` : ""} Run '${PROGRAM} --help' for the commands.`);
    return 2;
  }
  const cmd = COMMANDS[name];
  if (wantsHelp) return (say(process.stdout, usageOf(name, cmd)), 0);
  const rest = [...argv];
  for (const word of name.split(" ")) rest.splice(rest.indexOf(word), 1);
  let values: Values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: rest,
      options: { ...GLOBAL_OPTIONS, ...cmd.options },
      strict: true,
      allowPositionals: true,
    }) as {
      values: Values;
      positionals: string[];
    });
    if (positionals.length !== (cmd.positionals ?? 0)) {
      throw new UsageError(
        cmd.positionals ? `expected ${cmd.positionals} argument(s), got ${positionals.length}` : `unexpected argument '${positionals[0]}'`,
      );
    }
  } catch (err) {
    say(process.stderr, `${(err as Error).message}\n\n${usageOf(name, cmd)}`);
    return 2;
  }
  const out = output(values.json === true);
  try {
    const settings = loadCliSettings(values as { "api-url"?: string; "api-key"?: string });
    if (cmd.local && liveServers(settings.server) === 0) {
      out.warn(
        `no running server uses DATA_DIR=${settings.server.dataDir}: a server started on another DATA_DIR will not know what this command writes`,
      );
    }
    const code = await cmd.run({ values, positionals, settings, out, api: () => apiClient(settings.apiUrl, settings.apiKey) });
    return code ?? 0;
  } catch (err) {
    if (err instanceof UsageError) return (say(process.stderr, `${err.message}\n\n${usageOf(name, cmd)}`), 2);
    if (err instanceof SettingsError) return (say(process.stderr, err.message), 2);
    if (err instanceof ApiCallError) return (say(process.stderr, `Error: ${err.message}`), err.code === "missing_api_key" ? 2 : 1);
    return (say(process.stderr, `Error: ${(err as Error).message ?? String(err)}`), 1);
  }
}
