import type { AuditRecord } from "../../shared/records/audit";
import type { AuditSpec } from "./routes";

/** Entries one write carries at most; more wait for the next. */
const MAX_BATCH = 500;
/** A failed write is tried again after these pauses (the orgs service stores an entry once by its id). */
const RETRY_DELAYS_MS = [50, 250];

const sleep = (ms: number) => new Promise<void>((ok) => setTimeout(ok, ms));

interface Waiting {
  entry: AuditRecord;
  done: (err?: unknown) => void;
}

/**
 * The gateway's side of the audit log, by group commit: a request's entry joins the entries waiting
 * to be written; one write (one `orgs.recordAudit` call, one transaction) carries all that came in
 * while the previous write was under way, so concurrent mutations cost one broker round trip
 * together rather than one each. `record` resolves once its entry is stored, or rejects once the
 * write has failed every try.
 */
export class AuditWriter {
  private queue: Waiting[] = [];
  private writing = false;

  constructor(private readonly write: (entries: AuditRecord[]) => Promise<unknown>) {}

  record(entry: AuditRecord): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ entry, done: (err) => (err === undefined ? resolve() : reject(err)) });
      // The first entry waits for the rest of this turn of the event loop: answers completing together go together.
      if (!this.writing) {
        this.writing = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  /** Entries waiting for a write (not yet under way). */
  get waiting(): number {
    return this.queue.length;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        const err = await this.tryWrite(batch.map((w) => w.entry));
        for (const w of batch) w.done(err);
      }
    } finally {
      this.writing = false;
    }
  }

  /** Answers undefined once stored, else the last failure. */
  private async tryWrite(entries: AuditRecord[]): Promise<unknown> {
    let failure: unknown;
    for (let i = 0; i <= RETRY_DELAYS_MS.length; i += 1) {
      if (i > 0) await sleep(RETRY_DELAYS_MS[i - 1]);
      try {
        await this.write(entries);
        return undefined;
      } catch (err) {
        failure = err ?? new Error("audit write failed");
      }
    }
    return failure;
  }
}

/**
 * The resource an audited mutation changed: its type is the action's first part; its id the answer's
 * field `spec.id` when named, else the path's last parameter, else the answer's `id`. Nothing else of
 * the answer is read (it may hold a secret shown once).
 */
export function auditedResource(
  spec: AuditSpec,
  params: Record<string, string>,
  data: Record<string, unknown> | null | undefined,
): { type: string; id: string | null } {
  const type = spec.action.slice(0, spec.action.indexOf("."));
  const names = Object.keys(params);
  const fromAnswer = (field: string) => (typeof data?.[field] === "string" ? (data[field] as string) : null);
  if (spec.id !== undefined) return { type, id: fromAnswer(spec.id) };
  if (names.length > 0) return { type, id: params[names[names.length - 1]] };
  return { type, id: fromAnswer("id") };
}
