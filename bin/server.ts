import "./node-check";
import { loadSettings, SettingsError } from "../shared/config";
import { createBroker } from "../app/broker";
import { markServer } from "./server-mark";

/** `npm start`: the services SERVICES names (all by default) on this process. */
async function main(): Promise<void> {
  let settings;
  try {
    settings = loadSettings();
  } catch (err) {
    if (err instanceof SettingsError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const broker = createBroker(settings);
  const stop = (signal: string) => {
    broker.logger.info(`${signal} received, stopping`);
    broker.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGTERM", () => stop("SIGTERM"));
  process.once("SIGINT", () => stop("SIGINT"));
  await broker.start();
  // For the CLI: a server uses this DATA_DIR (bin/server-mark.ts).
  const unmark = markServer(settings, broker.nodeID);
  process.once("exit", unmark);
  if (settings.services.includes("gateway")) {
    broker.logger.info(`API listening on http://${settings.host === "0.0.0.0" ? "localhost" : settings.host}:${settings.port}/v1`);
  }
}

main().catch((err) => {
  process.stderr.write(`Failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
