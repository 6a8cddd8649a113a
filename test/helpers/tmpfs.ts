import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, rmdirSync, statSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DatabaseSync } from "node:sqlite";
import { DATABASE_FILE } from "../../shared/storage/sqlite";

/**
 * A small real tmpfs for a suite (Linux, as root; CI runs as root), unmounted at the end or at
 * exit. `skipReason` says why there is none (the suite is then skipped and says so).
 */
export interface Tmpfs {
  dir: string;
  skipReason?: string;
  unmount(): void;
}

export function mountTmpfs(size: string, label: string): Tmpfs {
  const dir = mkdtempSync(join(tmpdir(), `wfp-${label}-`));
  let mounted = false;
  let skipReason: string | undefined;
  if (process.platform !== "linux") skipReason = `tmpfs needs Linux, this is ${process.platform}`;
  else if (process.getuid?.() !== 0) skipReason = `mounting a tmpfs needs root; this runs as uid ${process.getuid?.()}`;
  else {
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir], { stdio: "pipe" });
      mounted = true;
    } catch (err) {
      skipReason = `mount -t tmpfs was refused: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim()}`;
    }
  }
  const unmount = () => {
    if (!mounted) return;
    try {
      execFileSync("umount", [dir], { stdio: "pipe" });
    } catch {
      execFileSync("umount", ["-l", dir], { stdio: "pipe" }); // something still holds a file: detach it
    }
    mounted = false;
    rmdirSync(dir);
  };
  process.once("exit", () => {
    try {
      unmount();
    } catch {
      // nothing more to do at exit
    }
  });
  if (skipReason) rmdirSync(dir);
  return { dir, skipReason, unmount };
}

/**
 * Takes every free block of the file system of `dataDir` (writing `filler`), with the WAL empty
 * first, so that every commit fails.
 *
 * SQLite (WAL mode) appends each commit to the `-wal` file; once a checkpoint has copied the WAL
 * into the database file, writers start again at the beginning of the WAL and reuse its space. So on
 * a full disk a WAL that has grown still takes commits, honestly (they are stored), and which writes
 * fail would depend on the WAL's size at the moment. Hence: checkpoint with TRUNCATE (the WAL becomes
 * 0 bytes, everything is in the database file), then write the filler until ENOSPC, all in one
 * synchronous stretch, so no write of this process (the whole platform runs here) comes between.
 * From then on every commit needs a new block: it fails (SQLITE_FULL) and is rolled back; reads,
 * served from the database file, work. A checkpoint thread (if the store runs one) has nothing to
 * copy and cannot grow the database file either.
 */
export function fillDisk(db: DatabaseSync, dataDir: string, filler: string): void {
  const wal = join(dataDir, `${DATABASE_FILE}-wal`);
  for (let i = 0; ; i += 1) {
    const r = db.prepare("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number };
    if (r.busy === 0 && (!existsSync(wal) || statSync(wal).size === 0)) break;
    if (i === 20) throw new Error(`the WAL could not be checkpointed and truncated (busy ${r.busy})`);
  }
  const fd = openSync(filler, "w");
  const chunk = Buffer.alloc(1 << 20, 1);
  try {
    // Big writes, then smaller ones, until not even one byte more is taken.
    for (const size of [1 << 20, 4096, 1]) {
      try {
        for (;;) writeSync(fd, chunk, 0, size);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
}
