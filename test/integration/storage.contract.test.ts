import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import mongoose from "mongoose";
import { loadSettings } from "../../shared/config";
import { openStore } from "../../shared/storage";
import { MongooseStore } from "../../shared/storage/mongoose";
import { DATABASE_FILE, SqliteStore } from "../../shared/storage/sqlite";
import { CHECKPOINTER_FILE } from "../../shared/storage/sqlite-writer";
import { waitFor } from "../../tools/procs";
import { ALL_TENANTS, type Doc } from "../../shared/storage/types";
import { withDatabase } from "../helpers/platform";
import { describeStoreContract, type StoreUnderTest } from "../helpers/store-contract";

const tempDir = () => mkdtempSync(join(tmpdir(), "wfp-s-"));

const ADAPTERS: [string, () => Promise<StoreUnderTest>, { persistent?: boolean }?][] = [
  [
    "embedded (SQLite)",
    async () => {
      const dir = tempDir();
      let store = new SqliteStore(dir);
      return {
        store,
        async reopen() {
          await store.close();
          store = new SqliteStore(dir);
          return store;
        },
        async stop() {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    { persistent: true },
  ],
];

// Wherever MONGO_URL points to a MongoDB replica set, it is tested too (npm run test:mongo).
const mongoUrl = process.env.MONGO_URL;
if (mongoUrl) {
  ADAPTERS.push([
    "MongoDB (mongoose)",
    async () => {
      const url = withDatabase(mongoUrl, `wfp_contract_${process.pid}_${Date.now()}`);
      let store = new MongooseStore(url);
      // A standalone server or an unreachable one fails here, saying which.
      await store.opened();
      await store.probe();
      return {
        store,
        async reopen() {
          await store.close();
          store = new MongooseStore(url);
          return store;
        },
        async stop() {
          await store.close();
          const conn = await mongoose.createConnection(url).asPromise();
          await conn.dropDatabase();
          await conn.close();
        },
      };
    },
    { persistent: true },
  ]);
}

for (const [name, make, opts] of ADAPTERS) describeStoreContract(name, make, opts);

interface Note extends Doc {
  text: string;
}
interface Job extends Doc {
  status: "due" | "claimed";
  by?: string;
}
const A = { org_id: "org_a", environment: "live" } as const;

/**
 * Another process on the same database file, through the built adapter (`npm test` builds first).
 * It reads commands as JSON lines on stdin and answers each with a JSON line.
 */
const CHILD = `
const { SqliteStore } = require(${JSON.stringify(resolve("dist/shared/storage/sqlite.js"))});
const { DatabaseSync } = require("node:sqlite");
const store = new SqliteStore(process.argv[1]);
const jobs = store.collection("jobs");
const notes = store.collection("notes");
const A = { org_id: "org_a", environment: "live" };
require("node:readline").createInterface({ input: process.stdin }).on("line", async (line) => {
  const cmd = JSON.parse(line);
  let out;
  if (cmd.op === "claimAll") {
    const won = [];
    for (;;) {
      const job = await jobs.update(A, { status: "due" }, { $set: { status: "claimed", by: "child" } }, { sort: { id: 1 } });
      if (!job) break;
      won.push(job.id);
    }
    out = won;
  } else if (cmd.op === "insertNotes") {
    await Promise.all(cmd.ids.map((id) => notes.insert({ id, ...A, text: "from the child" })));
    out = cmd.ids.length;
  } else if (cmd.op === "holdLock") {
    // A second connection holds the write lock for a while, as a long transaction elsewhere would.
    const other = new DatabaseSync(store.file, { timeout: 5000 });
    other.exec("BEGIN IMMEDIATE");
    process.stdout.write(JSON.stringify({ holding: true }) + "\\n");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, cmd.ms);
    other.exec("COMMIT");
    other.close();
    out = "released";
  }
  process.stdout.write(JSON.stringify({ out }) + "\\n");
});
process.stdout.write(JSON.stringify({ ready: true }) + "\\n");
`;

class Child {
  readonly proc: ChildProcess;
  private readonly lines: string[] = [];
  private waiting: ((line: string) => void) | undefined;

  constructor(dir: string) {
    this.proc = spawn(process.execPath, ["-e", CHILD, dir], { stdio: ["pipe", "pipe", "inherit"] });
    createInterface({ input: this.proc.stdout! }).on("line", (line) => {
      if (this.waiting) {
        const w = this.waiting;
        this.waiting = undefined;
        w(line);
      } else this.lines.push(line);
    });
  }

  next(): Promise<Record<string, unknown>> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(JSON.parse(line));
    return new Promise((ok) => (this.waiting = (l) => ok(JSON.parse(l))));
  }

  send(cmd: object): void {
    this.proc.stdin!.write(`${JSON.stringify(cmd)}\n`);
  }

  kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return Promise.resolve();
    return new Promise((done) => {
      this.proc.once("exit", () => done());
      this.proc.kill("SIGKILL");
    });
  }
}

describe("the embedded store's file, shared by processes", () => {
  let dir: string;
  let store: SqliteStore;
  let child: Child;
  beforeEach(async () => {
    dir = tempDir();
    store = new SqliteStore(dir);
    child = new Child(dir);
    expect(await child.next()).toEqual({ ready: true });
  });
  afterEach(async () => {
    await child.kill();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is one file under DATA_DIR that only its owner can read", () => {
    expect(statSync(join(dir, DATABASE_FILE)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, `${DATABASE_FILE}-wal`)).mode & 0o777).toBe(0o600);
  });

  it("hands 300 jobs to two processes claiming at once, each job to exactly one", async () => {
    const jobs = store.collection<Job>("jobs");
    const ids = Array.from({ length: 300 }, (_, i) => `job_${String(i).padStart(4, "0")}`);
    await Promise.all(ids.map((id) => jobs.insert({ id, ...A, status: "due" })));
    child.send({ op: "claimAll" });
    const mine: string[] = [];
    for (;;) {
      const job = await jobs.update(A, { status: "due" }, { $set: { status: "claimed", by: "parent" } }, { sort: { id: 1 } });
      if (!job) break;
      mine.push(job.id);
    }
    const theirs = (await child.next()).out as string[];
    expect([...mine, ...theirs].sort()).toEqual(ids);
    expect(await jobs.count(A, { by: "parent" })).toBe(mine.length);
    expect(await jobs.count(A, { by: "child" })).toBe(theirs.length);
  });

  it("keeps every write a process acknowledged when it is killed right after", async () => {
    const ids = Array.from({ length: 200 }, (_, i) => `n_${i}`);
    child.send({ op: "insertNotes", ids });
    expect((await child.next()).out).toBe(200);
    await child.kill();
    const notes = store.collection<Note>("notes");
    expect(await notes.count(A, {})).toBe(200);
    expect(await notes.get(A, "n_199")).toEqual({ id: "n_199", ...A, text: "from the child" });
  });

  it("never blocks its event loop on another process's write lock, and writes once it is free", async () => {
    const notes = store.collection<Note>("notes");
    await notes.insert({ id: "before", ...A, text: "x" });
    child.send({ op: "holdLock", ms: 600 });
    expect(await child.next()).toEqual({ holding: true });
    let last = performance.now();
    let worstGap = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      worstGap = Math.max(worstGap, now - last);
      last = now;
    }, 5);
    try {
      const writes = Array.from({ length: 20 }, (_, i) => notes.insert({ id: `during_${i}`, ...A, text: "waited" }));
      // Reads are not held up by a writer (WAL).
      expect(await notes.get(A, "before")).toMatchObject({ text: "x" });
      await Promise.all(writes);
      expect((await child.next()).out).toBe("released");
    } finally {
      clearInterval(ticker);
    }
    expect(await notes.count(A, {})).toBe(21);
    // The lock was held for 600 ms; no turn of this process's loop waited for it.
    expect(worstGap).toBeLessThan(150);
  });
});

describe("the embedded store's checkpoint thread", () => {
  /** The database file's own size: it grows only when a checkpoint copies the WAL into it (autocheckpoint is off). */
  const mainFileGrows = (dir: string) => {
    const before = statSync(join(dir, DATABASE_FILE)).size;
    return () => statSync(join(dir, DATABASE_FILE)).size > before;
  };

  it("is a module of its own, its source under jest and its compiled form in dist/", () => {
    expect(CHECKPOINTER_FILE).toBe(resolve("shared/storage/sqlite-checkpointer.cts"));
    expect(existsSync(resolve("dist/shared/storage/sqlite-checkpointer.cjs"))).toBe(true);
  });

  it("copies the WAL into the database file, run from its source", async () => {
    const dir = tempDir();
    const store = new SqliteStore(dir);
    try {
      const notes = store.collection<Note>("notes");
      await notes.insert({ id: "first", ...A, text: "x" });
      const grown = mainFileGrows(dir);
      await Promise.all(Array.from({ length: 200 }, (_, i) => notes.insert({ id: `n_${i}`, ...A, text: "x".repeat(500) })));
      await waitFor("a checkpoint into the database file", grown, 10_000);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("copies the WAL into the database file, run from dist/ in another process", async () => {
    const dir = tempDir();
    const child = new Child(dir);
    try {
      expect(await child.next()).toEqual({ ready: true });
      child.send({ op: "insertNotes", ids: ["first"] });
      expect((await child.next()).out).toBe(1);
      const grown = mainFileGrows(dir);
      child.send({ op: "insertNotes", ids: Array.from({ length: 200 }, (_, i) => `n_${i}`) });
      expect((await child.next()).out).toBe(200);
      await waitFor("a checkpoint by the child's thread", grown, 10_000);
    } finally {
      await child.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the store's wiring", () => {
  let dir: string;
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("shares one embedded store per DATA_DIR between brokers of a process, until the last handle closes", async () => {
    const settings = loadSettings({ DATA_DIR: dir });
    const first = openStore(settings);
    const second = openStore(settings);
    await first.collection<Note>("notes").insert({ id: "n1", ...A, text: "hi" });
    await first.close();
    expect(await second.collection<Note>("notes").get(A, "n1")).toMatchObject({ text: "hi" });
    await second.close();
    const again = new SqliteStore(dir);
    expect(await again.collection<Note>("notes").count(ALL_TENANTS, {})).toBe(1);
    await again.close();
  });
});

describe("the embedded store's columns, shared by processes that declare different indexes", () => {
  it("keeps a field another connection indexes in that index, though this one declared none on it", async () => {
    const dir = tempDir();
    const indexing = new SqliteStore(dir);
    const plain = new SqliteStore(dir);
    try {
      const withIndex = indexing.collection<Note & { n?: number }>("notes", [{ fields: { n: 1 } }]);
      await withIndex.insert({ id: "first", ...A, text: "a", n: 1 });
      const without = plain.collection<Note & { n?: number }>("notes");
      await without.insert({ id: "second", ...A, text: "b", n: 2 });
      expect((await withIndex.find(A, { n: { $gte: 1 } }, { sort: { n: 1 } })).map((d) => d.id)).toEqual(["first", "second"]);
      expect(await without.get(A, "first")).toEqual({ id: "first", ...A, text: "a", n: 1 });
      const plan = indexing.db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM "notes" WHERE "c_n" >= 1`).all() as { detail: string }[];
      expect(plan.map((p) => p.detail).join()).toMatch(/USING INDEX/);
    } finally {
      await plain.close();
      await indexing.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the embedded store's index over the documents with a field present", () => {
  it("holds only those, replaces the whole index of the same fields, and serves a range on the field", async () => {
    const dir = tempDir();
    const indexes = (store: SqliteStore) =>
      (
        store.db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'notes' AND sql IS NOT NULL`).all() as {
          name: string;
          sql: string;
        }[]
      ).sort((a, b) => a.name.localeCompare(b.name));
    try {
      const before = new SqliteStore(dir);
      const whole = before.collection<Note & { due?: number }>("notes", [{ fields: { org_id: 1, due: 1 } }]);
      await whole.insert({ id: "done", ...A, text: "a" });
      expect(indexes(before).map((i) => i.name)).toEqual(["notes__org_id__due_c"]);
      await before.close();

      const after = new SqliteStore(dir);
      const partial = after.collection<Note & { due?: number }>("notes", [{ fields: { org_id: 1, due: 1 }, present: "due" }]);
      await partial.insert({ id: "due", ...A, text: "b", due: 5 });
      expect(indexes(after)).toEqual([{ name: "notes__org_id__due_c__p_due", sql: expect.stringMatching(/WHERE "c_due" IS NOT NULL$/) }]);
      const entries = after.db
        .prepare(`SELECT count(*) AS n FROM "notes" INDEXED BY "notes__org_id__due_c__p_due" WHERE "c_due" IS NOT NULL`)
        .get() as { n: number };
      expect(entries.n).toBe(1);
      expect((await partial.find(A, { due: { $lte: 10 } }, { sort: { due: 1 } })).map((d) => d.id)).toEqual(["due"]);
      const plan = after.db
        .prepare(`EXPLAIN QUERY PLAN SELECT id FROM "notes" WHERE org_id = 'o' AND "c_due" <= 10 ORDER BY "c_due"`)
        .all() as { detail: string }[];
      expect(plan.map((p) => p.detail).join()).toMatch(/INDEX notes__org_id__due_c__p_due\b/);
      await after.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the embedded store's indexes, declared again in other directions", () => {
  it("replaces the index of the same fields in the file, and reads newest first from the new one without sorting", async () => {
    const dir = tempDir();
    const indexNames = (store: SqliteStore) =>
      (store.db.prepare(`PRAGMA index_list("notes")`).all() as { name: string; origin: string }[])
        .filter((i) => i.origin === "c")
        .map((i) => i.name)
        .sort();
    try {
      const before = new SqliteStore(dir);
      const descending = before.collection<Note & { n: number }>("notes", [{ fields: { org_id: 1, n: -1 } }, { fields: { n: 1 } }]);
      await descending.insert({ id: "first", ...A, text: "a", n: 1 });
      expect(indexNames(before)).toEqual(["notes__n_c", "notes__org_id__n_c_desc"]);
      await before.close();

      const after = new SqliteStore(dir);
      const ascending = after.collection<Note & { n: number }>("notes", [{ fields: { org_id: 1, n: 1 } }, { fields: { n: 1 } }]);
      await ascending.insert({ id: "second", ...A, text: "b", n: 2 });
      expect(indexNames(after)).toEqual(["notes__n_c", "notes__org_id__n_c"]);
      expect((await ascending.find(A, {}, { sort: { n: -1 } })).map((d) => d.id)).toEqual(["second", "first"]);
      const plan = after.db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM "notes" WHERE org_id = 'o' ORDER BY "c_n" DESC`).all() as {
        detail: string;
      }[];
      expect(plan.map((p) => p.detail).join()).toMatch(/USING INDEX notes__org_id__n_c\b/);
      expect(plan.map((p) => p.detail).join()).not.toMatch(/TEMP B-TREE/);
      await after.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
