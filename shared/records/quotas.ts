import { ApiError } from "../errors";
import type { ReadView, Doc, Filter, Scope } from "../storage/types";

/**
 * Per-organization quotas (README, Security: quotas and limits). Counts are bounded reads through
 * an index (`count(…, {limit})`): a check reads at most `limit` index entries, never the whole
 * collection. A check and the write after it are not one atomic step: N requests racing at the
 * limit can each see `limit - 1` and all succeed, so a quota can be exceeded by the number of
 * concurrent creates in that environment (the per-key and per-gateway rate limits bound those).
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
