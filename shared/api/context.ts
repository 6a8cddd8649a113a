import type { Chain } from "../records/chain";
import type { Context } from "moleculer";
import { ApiError } from "../errors";
import type { Environment, Tenant } from "../storage/types";
import type { Actor } from "./wire";

/** Who is calling, as the gateway established it; travels in `ctx.meta.auth` across NATS. */
export interface Caller {
  key_id: string;
  /** The key's name, as the audit trail records who did something (keys are never renamed). */
  key_name: string;
  org_id: string;
  environment: Environment;
  scopes: string[];
}

export interface CallMeta {
  auth?: Caller;
  api_version?: string;
  request_id?: string;
  /** The client's W3C traceparent, when valid (shared/runtime/trace.ts). */
  traceparent?: string;
  /** The chain of event-started runs the request comes from (shared/records/chain.ts). */
  chain?: Chain;
}

export function callerOf(ctx: Context<unknown, CallMeta>): Caller {
  const caller = ctx.meta.auth;
  if (!caller) throw new ApiError("missing_api_key", "This action needs an authenticated caller");
  return caller;
}

/** The caller's organization and environment: the scope of every query a published action makes. */
export function tenantOf(ctx: Context<unknown, CallMeta>): Required<Tenant> {
  const { org_id, environment } = callerOf(ctx);
  return { org_id, environment };
}

/** Who makes this call, as the audit trail records it on resources and events: the key's id and name. */
export function actorOf(ctx: Context<unknown, CallMeta>): Actor {
  const { key_id, key_name } = callerOf(ctx);
  return { key_id, key_name: key_name ?? null };
}
