import { useEffect, useState } from "preact/hooks";
import { call, type Environment, type Me } from "./api";

/**
 * The signed-in keys live in sessionStorage only: gone when the tab closes, never in a cookie or in
 * localStorage, never sent anywhere but the Authorization header of this origin's /v1 API.
 */
const STORAGE_KEY = "dashboard.session";

export interface Session {
  keys: Partial<Record<Environment, string>>;
  identities: Partial<Record<Environment, Me>>;
  environment: Environment;
}

export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    if (!raw) return null;
    const session = JSON.parse(raw) as Session;
    return session.keys[session.environment] && session.identities[session.environment] ? session : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session | null): void {
  if (session) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  else sessionStorage.removeItem(STORAGE_KEY);
}

/** Checks each key with GET /me; both must belong to one organization, one per environment. */
export async function signIn(entered: { live?: string; test?: string }): Promise<Session> {
  const identities: Session["identities"] = {};
  const keys: Session["keys"] = {};
  const errors: string[] = [];
  for (const field of ["live", "test"] as const) {
    const key = entered[field]?.trim();
    if (!key) continue;
    try {
      const identity = await call<Me>(key, "GET", "/me");
      if (identity.environment !== field) {
        errors.push(`The ${field} key field holds a ${identity.environment} key (${identity.api_key.prefix}…).`);
        continue;
      }
      identities[field] = identity;
      keys[field] = key;
    } catch (err) {
      errors.push(`${field === "live" ? "Live" : "Test"} key: ${(err as Error).message}`);
    }
  }
  if (errors.length > 0) throw new Error(errors.join(" "));
  if (identities.live && identities.test && identities.live.org.id !== identities.test.org.id) {
    throw new Error("The two keys belong to different organizations.");
  }
  const environment: Environment = identities.live ? "live" : "test";
  if (!identities[environment]) throw new Error("Enter a live key, a test key, or both.");
  return { keys, identities, environment };
}

/** The current hash route, split on "/": `#/webhooks/wh_1` is `["webhooks", "wh_1"]`. */
export function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, "").split("?")[0].split("/").filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

export const href = (...parts: string[]): string => `#/${parts.map(encodeURIComponent).join("/")}`;
