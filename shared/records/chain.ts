/**
 * The chain an event belongs to, carried by the requests a run's http step sends: a run started by
 * an event sends `Service-Chain: <root event id>:<depth>`, and an event posted with it (POST /events
 * through the gateway) joins that chain one link further, so workflows that start each other
 * through the API stop at the chain's budget as they do through emit steps.
 *
 * The header is not signed: what it can do is tie the caller's events to a chain of the caller's
 * own environment (chain budgets are kept per organization and environment), and with a greater
 * depth, which only ever starts fewer runs. The engine sets it on its requests over any value of a
 * step's, and a step may not set it (workflows.logic.ts).
 */
export const SERVICE_CHAIN_HEADER = "service-chain";

export interface Chain {
  chain_root: string;
  chain_depth: number;
}

const CHAIN = /^([a-z]{2,8}_[A-Za-z0-9]{1,64}):(\d{1,3})$/;

export const chainHeader = (chain: Chain): string => `${chain.chain_root}:${chain.chain_depth}`;

/** The chain a `Service-Chain` header names, when well-formed. */
export function chainOf(header: unknown): Chain | undefined {
  if (typeof header !== "string") return undefined;
  const m = CHAIN.exec(header.trim());
  return m ? { chain_root: m[1], chain_depth: Number(m[2]) } : undefined;
}
