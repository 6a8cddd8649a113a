import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { SecretsKey } from "../../shared/config";
import type { Environment } from "../../shared/storage/types";
import type { Secret } from "../../shared/api/wire";
import type { Step } from "./workflows.logic";

/**
 * Secrets (`POST /secrets`, used in http steps as `{{secrets.NAME}}`): each value is stored
 * encrypted with AES-256-GCM under the current key of SECRETS_KEYS, with the key's id beside it, a
 * fresh 12-byte nonce and the 16-byte tag. The associated data binds the ciphertext to its
 * organization, environment and name, so a row copied onto another secret does not decrypt.
 */
export const SECRET_NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
export const SECRET_VALUE_MAX_CHARS = 8192;

/** A secret as stored: its metadata (shared/api/wire.ts) and the sealed value. */
export interface SecretDoc extends Omit<Secret, "object"> {
  id: string;
  org_id: string;
  /** base64: the nonce, the ciphertext, the GCM tag. */
  iv: string;
  value: string;
  tag: string;
}

export interface Sealed {
  key_id: string;
  iv: string;
  value: string;
  tag: string;
}

export const secretView = ({ name, environment, key_id, created_at, updated_at }: SecretDoc): Secret => ({
  object: "secret",
  name,
  environment,
  key_id,
  created_at,
  updated_at,
});

/** A secret a step cannot have: missing, SECRETS_KEYS unset, a key id it no longer holds, or a ciphertext changed since it was written. */
export class SecretUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SecretUnavailable";
  }
}

const aadOf = (owner: { org_id: string; environment: Environment; name: string }): Buffer =>
  Buffer.from(`${owner.org_id}/${owner.environment}/${owner.name}`, "utf8");

const keyCache = new Map<string, Buffer>();
function keyBytes(key: SecretsKey): Buffer {
  let bytes = keyCache.get(key.key);
  if (!bytes) {
    bytes = Buffer.from(key.key, "base64");
    keyCache.set(key.key, bytes);
  }
  return bytes;
}

/** Seals `plaintext` under the current key (`keys[0]`). */
export function seal(
  keys: readonly SecretsKey[],
  owner: { org_id: string; environment: Environment; name: string },
  plaintext: string,
): Sealed {
  const current = keys[0];
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", keyBytes(current), iv);
  cipher.setAAD(aadOf(owner));
  const value = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return { key_id: current.id, iv: iv.toString("base64"), value: value.toString("base64"), tag: cipher.getAuthTag().toString("base64") };
}

/** The plaintext of a sealed value, or SecretUnavailable saying why not. */
export function open(keys: readonly SecretsKey[], doc: Sealed & { org_id: string; environment: Environment; name: string }): string {
  const key = keys.find((k) => k.id === doc.key_id);
  if (!key)
    throw new SecretUnavailable(
      `the secret '${doc.name}' is encrypted under key '${doc.key_id}', which SECRETS_KEYS no longer holds (held: ${keys.map((k) => k.id).join(", ") || "none"})`,
    );
  try {
    const decipher = createDecipheriv("aes-256-gcm", keyBytes(key), Buffer.from(doc.iv, "base64"));
    decipher.setAAD(aadOf(doc));
    decipher.setAuthTag(Buffer.from(doc.tag, "base64"));
    return Buffer.concat([decipher.update(Buffer.from(doc.value, "base64")), decipher.final()]).toString("utf8");
  } catch {
    throw new SecretUnavailable(
      `the secret '${doc.name}' does not decrypt under key '${doc.key_id}': it was changed since it was stored, or the key was`,
    );
  }
}

const SECRET_TEMPLATE = /\{\{\s*secrets\.([A-Za-z][A-Za-z0-9_]*)\s*\}\}/g;

/** The names of the secrets a step's definition uses (`{{secrets.NAME}}` in an http step's url, headers or body). */
export function secretNames(step: Step | undefined): string[] {
  if (step?.type !== "http") return [];
  const text = JSON.stringify([step.url, step.headers, step.body]);
  // Most steps use none: no search of the text for them.
  if (!text.includes("secrets.")) return [];
  return [...new Set([...text.matchAll(SECRET_TEMPLATE)].map((m) => m[1]))];
}
