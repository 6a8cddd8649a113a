import { ApiError } from "../errors";

/** Every dated API version, oldest first. A request pins one with `Service-Version: YYYY-MM-DD`. */
export const API_VERSIONS = ["2026-11-01"] as const;
export type ApiVersion = (typeof API_VERSIONS)[number];
export const LATEST_VERSION: ApiVersion = API_VERSIONS[API_VERSIONS.length - 1];

const DATE_SHAPE = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * The shape of `Service-Version` as the API reference states it: a date as YYYY-MM-DD with a month
 * 01-12 and a day 01-31. A value of this shape is still refused when it is no calendar date
 * (2026-02-30) or before the first version.
 */
export const SERVICE_VERSION_PATTERN = "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$";

function isRealDate(value: string): boolean {
  const match = DATE_SHAPE.exec(value);
  if (!match) return false;
  const date = new Date(`${value}T00:00:00.000Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(value);
}

/**
 * The version a request runs under: the latest known version on or before the header's date, or
 * the organization's pinned version when there is no header.
 */
export function resolveVersion(header: string | undefined, pinned: string | undefined): ApiVersion {
  if (header === undefined || header === "") {
    return (API_VERSIONS as readonly string[]).includes(pinned ?? "") ? (pinned as ApiVersion) : LATEST_VERSION;
  }
  const value = header.trim();
  if (!isRealDate(value)) {
    throw new ApiError("invalid_version", `Service-Version must be a date as YYYY-MM-DD, got '${value}'`, {
      param: "Service-Version",
    });
  }
  let resolved: ApiVersion | undefined;
  for (const version of API_VERSIONS) if (version <= value) resolved = version;
  if (!resolved) {
    throw new ApiError("unsupported_version", `Service-Version ${value} is before the first version of this API (${API_VERSIONS[0]})`, {
      param: "Service-Version",
    });
  }
  return resolved;
}
