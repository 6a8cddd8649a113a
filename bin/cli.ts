import { parseArgs } from "node:util";
import { createBroker } from "../app/broker";
import { loadSettings, SettingsError, type Settings } from "../shared/config";
import { openStore } from "../shared/storage";

const USAGE = `Usage: npm run --silent cli -- orgs create --name "Acme"

Creates an organization with one live and one test org:admin key and prints one JSON object:
{"org": {...}, "api_keys": [{"key": "svc_live_…", ...}, {"key": "svc_test_…", ...}]}
Uses the server's DATA_DIR / MONGO_URL, and works while the server runs.`;

function fail(message: string, code = 2): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

async function createOrg(name: string): Promise<unknown> {
  const settings: Settings = { ...loadSettings(), transporter: undefined, services: ["orgs", "keys"], logLevel: false };
  // A local broker runs the same orgs and keys code as the server, on the same database file.
  const store = openStore(settings);
  const broker = createBroker(settings, {}, store);
  await broker.start();
  try {
    return await broker.call("orgs.create", { name });
  } finally {
    await broker.stop();
    await store.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const [noun, verb, ...rest] = argv;
  if (noun !== "orgs" || verb !== "create") fail(USAGE);
  const { values } = parseArgs({ args: rest, options: { name: { type: "string" } }, strict: true });
  const name = values.name?.trim();
  if (!name) fail(`--name is required\n\n${USAGE}`);
  const result = await createOrg(name);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof SettingsError) fail(err.message);
  const e = err as { message?: string; data?: unknown };
  fail(`Error: ${e.message ?? String(err)}`, 1);
});
