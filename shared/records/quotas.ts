import { ApiError, isDuplicate } from "../errors";
import {
  collectionSpec,
  type AtomicWrite,
  type Collection,
  type Doc,
  type Environment,
  type Filter,
  type ReadView,
  type Scope,
} from "../storage/types";

/**
 * Per-organization quotas (README, Security: quotas and limits). Counts are bounded reads through
 * an index (`count(…, {limit})`): a check reads at most `limit` index entries, never the whole
 * collection. Such a check and the write after it are not one atomic step (requests racing at the
 * limit can each see `limit - 1`), so the quotas on what many clients create at once (webhooks,
 * workflows) are held by a counter row instead (`quotaWrite`): exact under any concurrency.
 */
export const QUOTAS = {
  /** Webhook endpoints per environment of an organization. */
  webhooks_per_environment: 50,
  /** Active (not revoked) API keys per environment; expired keys count until revoked. */
  active_api_keys_per_environment: 100,
  /** Workflows per environment. */
  workflows_per_environment: 200,
  /** Runs started from one root event, through every workflow its chain of events triggers. */
  runs_per_event_chain: 100,
  /** Signing secrets alive on one webhook: the current one and at most one rotated out. */
  signing_secrets_per_webhook: 2,
  /** Secrets (`POST /secrets`) per environment. */
  secrets_per_environment: 200,
} as const;
export type QuotaName = keyof typeof QUOTAS;

/** The 400 a client sees at a count quota: names the quota and its limit. */
export const quotaExceeded = (quota: QuotaName, limit: number, what: string): ApiError =>
  new ApiError("quota_exceeded", `Quota ${quota} reached: at most ${limit} ${what}; delete some to make room`, { quota, limit });

/** Throws `quota_exceeded` when `filter` already matches `limit` documents (read at most `limit`). */
export async function checkCountQuota<T extends Doc>(
  collection: ReadView<T>,
  scope: Scope,
  filter: Filter,
  quota: QuotaName,
  limit: number,
  what: string,
): Promise<void> {
  if ((await collection.count(scope, filter, { limit })) >= limit) throw quotaExceeded(quota, limit, what);
}

/**
 * One tenant's use of one count quota: `used` is what exists, moved in the same atomic write as
 * each creation (`quotaWrite`) and right after each deletion (`releaseQuota`).
 */
export interface QuotaCounterDoc extends Doc {
  org_id: string;
  environment: Environment;
  used: number;
  /** When `used` last changed (ms since the epoch). */
  changed_at: number;
}

/** A service's quota counters: a collection of its own (each collection has one writer). */
export const quotaCounters = (name: string) => collectionSpec<QuotaCounterDoc>(name, []);

/**
 * A counter untouched this long may be recounted when it says the quota is full: a process that
 * died between a deletion and its release left it one too high. A counter in use is never
 * recounted (a deletion and its release are milliseconds apart).
 */
const RECOUNT_QUIET_MS = 10_000;

interface QuotaArgs {
  counters: Collection<QuotaCounterDoc>;
  tenant: { org_id: string; environment: Environment };
  quota: QuotaName;
  limit: number;
  /** How the quota is worded in the 400 ("webhooks per environment"). */
  what: string;
  /** What exists now, counted up to `limit` at least (a bounded read). */
  count: () => Promise<number>;
}

const counterId = ({ quota, tenant }: Pick<QuotaArgs, "quota" | "tenant">) => `${quota}.${tenant.org_id}.${tenant.environment}`;

/**
 * The write that takes one unit of a count quota, for `store.atomically` beside the insert it
 * allows: a compare-and-set on the tenant's counter (`used < limit` → `used + 1`), so the creation
 * and its count are stored together or not at all, and no number of concurrent creations passes
 * the limit. `atomically` answering null means the quota filled meanwhile (`quotaExceeded`).
 * Throws `quota_exceeded` at once when the counter is full. The counter is made on first use from
 * a count of what exists.
 */
export async function quotaWrite(args: QuotaArgs): Promise<AtomicWrite> {
  const { counters, tenant, quota, limit, what } = args;
  const id = counterId(args);
  let row = await counters.findOne(tenant, { id });
  if (!row) {
    const doc: QuotaCounterDoc = { id, ...tenant, used: await args.count(), changed_at: Date.now() };
    try {
      row = await counters.insert(doc);
    } catch (err) {
      // Made meanwhile by a concurrent first use: that one stands.
      if (!isDuplicate(err)) throw err;
      row = await counters.findOne(tenant, { id });
    }
  }
  if (row && row.used >= limit && Date.now() - row.changed_at > RECOUNT_QUIET_MS) {
    // Compare-and-set on `used`: a creation or deletion meanwhile makes this recount lose.
    const actual = await args.count();
    if (actual < row.used) {
      row = (await counters.update(tenant, { id, used: row.used }, { $set: { used: actual, changed_at: Date.now() } })) ?? row;
    }
  }
  if (!row || row.used >= limit) throw quotaExceeded(quota, limit, what);
  return {
    op: "update",
    collection: counters,
    scope: tenant,
    filter: { id, used: { $lt: limit } },
    update: { $inc: { used: 1 }, $set: { changed_at: Date.now() } },
  };
}

/** After a deletion: its unit of the quota is free again. */
export async function releaseQuota(args: Pick<QuotaArgs, "counters" | "tenant" | "quota">): Promise<void> {
  await args.counters.update(
    args.tenant,
    { id: counterId(args), used: { $gt: 0 } },
    { $inc: { used: -1 }, $set: { changed_at: Date.now() } },
  );
}
