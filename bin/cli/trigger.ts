import { isSystemType } from "../../shared/records/events";
import type { Api } from "./http";

export type Triggered =
  { fixture: false; event: { id: string; type: string } } | { fixture: true; type: string; note: string; key_id: string };

/** The name fixture keys carry, so they are recognised in `keys list` and the event log. */
export const FIXTURE_KEY_NAME = "cli trigger fixture";

/**
 * `trigger TYPE`: a client type is emitted (POST /events). Clients cannot emit system types; for
 * the ones an API call causes, the CLI makes that call instead (a fixture): answers null for the others.
 */
export async function triggerEvent(api: Api, type: string, data: Record<string, unknown>): Promise<Triggered | null> {
  if (!isSystemType(type)) {
    const { data: event } = await api.call("POST", "/events", { type, data });
    return { fixture: false, event };
  }
  if (type !== "api_key.created" && type !== "api_key.revoked") return null;
  // The least a key can hold, revoked at once: the fixture leaves no usable credential behind.
  const { data: key } = await api.call("POST", "/api-keys", { name: FIXTURE_KEY_NAME, scopes: ["events:read"] });
  await api.call("DELETE", `/api-keys/${key.id}`);
  return {
    fixture: true,
    type,
    key_id: key.id,
    note: `key ${key.id} '${FIXTURE_KEY_NAME}' created and revoked: api_key.created, api_key.revoked`,
  };
}
