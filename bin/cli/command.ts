import type { ParseArgsConfig } from "node:util";
import type { Api } from "./http";
import type { Output } from "./output";
import type { CliSettings } from "./settings";

/** What every command is: its usage, its options, and what it does with them. */
export type Options = NonNullable<ParseArgsConfig["options"]>;
export type Values = Record<string, string | boolean | string[] | undefined>;

export interface Ctx {
  values: Values;
  positionals: string[];
  settings: CliSettings;
  out: Output;
  api: () => Api;
}

export interface Command {
  /** `cli <name> …` as the usage line writes it, after the command's name. */
  args: string;
  summary: string;
  /** Lines on the options, below the usage line. */
  details?: string;
  options?: Options;
  /** How many arguments it takes: exactly this many, or [least, most]. */
  positionals?: number | [number, number];
  /** Works on the store under DATA_DIR (warns when no server uses it), not through the API. */
  local?: true;
  run(c: Ctx): Promise<number | void>;
}

/** A mistake in the command line: exit 2 with the command's usage. */
export class UsageError extends Error {}

export const required = (c: Ctx, name: string): string => {
  const value = c.values[name];
  if (typeof value !== "string" || value.trim() === "") throw new UsageError(`--${name} is required`);
  return value.trim();
};

export const optional = (c: Ctx, name: string): string | undefined => {
  const value = c.values[name];
  return typeof value === "string" ? value : undefined;
};

export const list = (raw: string) =>
  raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

export const limitOf = (c: Ctx): number => {
  const raw = optional(c, "limit") ?? "100";
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 100) throw new UsageError("--limit must be a whole number from 1 to 100");
  return Number(raw);
};

/** A JSON object given as an option's text. */
export function jsonObject(c: Ctx, name: string): Record<string, unknown> | undefined {
  const raw = optional(c, name);
  if (raw === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new UsageError(`--${name} must be JSON`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new UsageError(`--${name} must be a JSON object`);
  return value as Record<string, unknown>;
}

/** A path segment from an argument. */
export const seg = (value: string) => encodeURIComponent(value);
