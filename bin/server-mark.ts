import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Settings } from "../shared/config";

/**
 * A running server's mark under DATA_DIR (`servers/<node>.json`, rewritten every few seconds), so
 * the CLI can tell whether any server uses the store it is about to write: keys created in a
 * DATA_DIR no server reads are refused by the server. A mark not renewed for LAPSE_MS is stale.
 */
const RENEW_MS = 5_000;
const LAPSE_MS = 3 * RENEW_MS;

const dirOf = (dataDir: string) => join(resolve(dataDir), "servers");

/** Keeps this process's mark while it runs (the embedded store only); answers a function that removes it. */
export function markServer(settings: Settings, nodeId: string): () => void {
  if (settings.mongoUrl) return () => undefined;
  const dir = dirOf(settings.dataDir);
  const file = join(dir, `${nodeId.replace(/[^\w.-]/g, "_")}.json`);
  const write = () => {
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(file, JSON.stringify({ node_id: nodeId, pid: process.pid, port: settings.port, services: settings.services }));
    } catch {
      // A full or read-only disk: the store reports it; the mark only helps the CLI warn.
    }
  };
  write();
  const timer = setInterval(write, RENEW_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    rmSync(file, { force: true });
  };
}

/** How many servers renewed their mark under DATA_DIR lately; null with MongoDB (no DATA_DIR). */
export function liveServers(settings: Pick<Settings, "dataDir" | "mongoUrl">, now = Date.now()): number | null {
  if (settings.mongoUrl) return null;
  try {
    const dir = dirOf(settings.dataDir);
    return readdirSync(dir).filter((name) => name.endsWith(".json") && now - statSync(join(dir, name)).mtimeMs < LAPSE_MS).length;
  } catch {
    return 0;
  }
}
