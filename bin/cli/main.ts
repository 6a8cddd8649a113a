import { parseArgs } from "node:util";
import { SettingsError } from "../../shared/config";
import { liveServers } from "../server-mark";
import { UsageError, type Command, type Options, type Values } from "./command";
import { BULK_COMMANDS } from "./commands/bulk";
import { EVENT_COMMANDS } from "./commands/events";
import { HOOK_COMMANDS } from "./commands/hooks";
import { KEY_COMMANDS } from "./commands/keys";
import { ORG_COMMANDS } from "./commands/orgs";
import { RAW_COMMANDS } from "./commands/raw";
import { RESEND_COMMANDS } from "./commands/resend";
import { SCHEDULE_COMMANDS } from "./commands/schedules";
import { STORAGE_COMMANDS } from "./commands/storage";
import { WEBHOOK_COMMANDS } from "./commands/webhooks";
import { WORKFLOW_COMMANDS } from "./commands/workflows";
import { apiClient, ApiCallError } from "./http";
import { output } from "./output";
import { printableBlock } from "./printable.logic";
import { loadCliSettings } from "./settings";

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

const COMMANDS: Record<string, Command> = {
  ...ORG_COMMANDS,
  ...KEY_COMMANDS,
  ...WEBHOOK_COMMANDS,
  ...EVENT_COMMANDS,
  ...RESEND_COMMANDS,
  ...WORKFLOW_COMMANDS,
  ...SCHEDULE_COMMANDS,
  ...BULK_COMMANDS,
  ...HOOK_COMMANDS,
  ...RAW_COMMANDS,
  ...STORAGE_COMMANDS,
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

/** What the CLI says to people: a tenant's text in it (an error naming a webhook) shows its control characters escaped. */
const say = (stream: NodeJS.WriteStream, text: string) => stream.write(`${printableBlock(text)}\n`);

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
    const [least, most] = Array.isArray(cmd.positionals) ? cmd.positionals : [cmd.positionals ?? 0, cmd.positionals ?? 0];
    if (positionals.length < least || positionals.length > most) {
      throw new UsageError(
        most > 0
          ? `expected ${least === most ? least : `${least} to ${most}`} argument(s), got ${positionals.length}`
          : `unexpected argument '${positionals[0]}'`,
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
