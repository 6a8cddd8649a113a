import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../../tools/procs";
import { api } from "./platform";

export { freePort, runCli, startNats, startNode, waitFor, type NatsServer, type Proc as NodeProc } from "../../tools/procs";

/** Until the gateway answers and reaches the services a key lookup needs. */
export async function waitForGateway(baseUrl: string, key: string): Promise<void> {
  await waitFor(`${baseUrl} to serve`, async () => (await api(baseUrl, "GET", "/api-keys?per_page=1", { key })).status === 200);
}

export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "wfp-c-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
