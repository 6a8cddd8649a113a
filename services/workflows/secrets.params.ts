import { pageParams, type PageParams } from "../../shared/api/pagination";
import { SECRET_VALUE_MAX_CHARS } from "./secrets.logic";

// The name's shape is checked in the handler, to say what a name may hold; the value is never echoed.
const name = { type: "string", min: 1, max: 64 } as const;

export const createSecretParams = { $$strict: true, name, value: { type: "string", min: 1, max: SECRET_VALUE_MAX_CHARS } } as const;
export interface CreateSecretParams {
  name: string;
  value: string;
}

export const secretNameParams = { $$strict: true, name } as const;
export interface SecretNameParams {
  name: string;
}

export const listSecretsParams = { $$strict: true, ...pageParams } as const;
export type ListSecretsParams = PageParams;
