import { ALL_TENANTS, type Collection, type Environment } from "../../shared/storage/types";
import type { RunDoc } from "./run-doc";
import type { TenantSlots } from "./tenant-slots";

/** The most overdue runs read at once, their tenant fields only (the sparse due index). */
export const DISCOVER_ROWS = 64;
/** Organizations looked at one by one, at most, in one read behind those runs. */
export const DISCOVER_ORGS = 16;
/**
 * Reads behind the most overdue runs start at most this often: every run's end on a node looks for
 * tenants with room while one tenant is at its share, and such a read is up to 1 + 3 × DISCOVER_ORGS
 * statements.
 */
export const BEHIND_EVERY_MS = 500;
const ENVIRONMENTS: readonly Environment[] = ["live", "test"];

/**
 * Finds tenants with due runs this node has room for, and puts them in the turns of its slots
 * (tenant-slots.ts). Each read is bounded whatever is stored:
 * - the DISCOVER_ROWS most overdue runs' tenants, from the `(due_at, org_id, environment)` index;
 * - when those rows are all of tenants without room here (one tenant's backlog, however long),
 *   the organizations with runs due or in flight one at a time, from the partial
 *   `(org_id, environment, due_at)` index: one seek to the next organization after the last one
 *   looked at, one per environment for its most overdue run; at most DISCOVER_ORGS organizations,
 *   going on from there at the next read and starting over at the end; at most one such read per
 *   BEHIND_EVERY_MS.
 */
export class DueTenants {
  /** The organization the last read behind the most overdue runs stopped at ("" before the first). */
  private after = "";
  /** When the last read behind them began. */
  private behindAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly runs: Collection<RunDoc>,
    private readonly slots: TenantSlots,
  ) {}

  /** Answers whether a tenant with room was found. */
  async discover(now: number): Promise<boolean> {
    const rows = await this.runs.pluck(ALL_TENANTS, { due_at: { $lte: now } }, ["org_id", "environment"], {
      sort: { due_at: 1 },
      limit: DISCOVER_ROWS,
    });
    let found = false;
    for (const row of rows) {
      if (!this.slots.room(row)) continue;
      this.slots.waiting(row);
      found = true;
    }
    if (found || rows.length < DISCOVER_ROWS || now - this.behindAt < BEHIND_EVERY_MS) return found;
    this.behindAt = now;
    return this.behind(now);
  }

  /** Organizations one at a time from `after`: those with a due run in an environment with room join the turns. */
  private async behind(now: number): Promise<boolean> {
    let found = false;
    let startedOver = this.after === "";
    for (let looked = 0; looked < DISCOVER_ORGS;) {
      // Any run with a due time (in flight or due later too): the partial index holds only those.
      const [next] = await this.runs.pluck(ALL_TENANTS, { org_id: { $gt: this.after }, due_at: { $gte: 0 } }, ["org_id"], {
        sort: { org_id: 1 },
        limit: 1,
      });
      if (!next) {
        if (startedOver) break;
        startedOver = true;
        this.after = "";
        continue;
      }
      looked += 1;
      this.after = next.org_id;
      for (const environment of ENVIRONMENTS) {
        const tenant = { org_id: next.org_id, environment };
        if (!this.slots.room(tenant)) continue;
        const due = await this.runs.pluck(ALL_TENANTS, { ...tenant, due_at: { $lte: now } }, ["org_id"], {
          sort: { due_at: 1 },
          limit: 1,
        });
        if (due.length === 0) continue;
        this.slots.waiting(tenant);
        found = true;
      }
    }
    return found;
  }
}
