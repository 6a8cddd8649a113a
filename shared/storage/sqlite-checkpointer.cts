/**
 * The checkpoint thread of one SQLite database file (started by startCheckpointer in
 * sqlite-writer.ts, which says why it exists). CommonJS with `require`, so that both forms it is
 * started in load it as it is: the compiled `.cjs` under dist/, and this file under jest, where Node
 * strips its types.
 */
/* eslint-disable @typescript-eslint/no-require-imports -- see above: no import syntax in a CommonJS file Node runs as written */
const { parentPort, workerData } = require("node:worker_threads") as typeof import("node:worker_threads");
const { DatabaseSync } = require("node:sqlite") as typeof import("node:sqlite");
const { statSync } = require("node:fs") as typeof import("node:fs");
/* eslint-enable @typescript-eslint/no-require-imports */

export interface CheckpointerData {
  /** The database file. */
  file: string;
  /** How often a PASSIVE checkpoint runs. */
  everyMs: number;
  /** The WAL size past which a RESTART follows it. */
  restartBytes: number;
}

const { file, everyMs, restartBytes } = workerData as CheckpointerData;
const db = new DatabaseSync(file, { timeout: 2000 });
db.exec("PRAGMA wal_autocheckpoint = 0");

const timer = setInterval(() => {
  try {
    let wal = 0;
    try {
      wal = statSync(`${file}-wal`).size;
    } catch {
      // No WAL yet: nothing was written since it was last reset.
    }
    db.exec("PRAGMA wal_checkpoint(PASSIVE)");
    if (wal > restartBytes) db.exec("PRAGMA wal_checkpoint(RESTART)");
  } catch {
    // Busy (another process checkpoints) or a failing disk: the next turn tries again.
  }
}, everyMs);

// Any message means stop: close the connection, and let the thread end.
parentPort!.on("message", () => {
  clearInterval(timer);
  db.close();
  parentPort!.close();
});
