/**
 * The words an http step's failure is stored and logged in. They quote the step's URL as written
 * (its template), never as filled in: a filled URL may hold a secret's value, and any part of it
 * quoted (cut to a length, lower-cased as a host name, or inside a resolver's message) would give
 * that part away, past what redaction of the whole value can find. What went wrong is told in
 * fixed words chosen from what the check or the connection reported.
 */
const TEMPLATE_QUOTED_MAX = 200;

/** The step's URL template, as quoted in an error. */
export const quotedTemplate = (template: string): string =>
  `'${template.length > TEMPLATE_QUOTED_MAX ? `${template.slice(0, TEMPLATE_QUOTED_MAX)}…` : template}'`;

/** Why the filled URL was refused before anything was sent (the target rules of shared/net/net-guard.ts). */
const URL_REASONS: readonly (readonly [RegExp, string])[] = [
  [/absolute URL/, "it is not an absolute URL of at most 2048 characters once filled in"],
  [/must use https/, "it must use https (http is accepted in the test environment only)"],
  [/user name or password/, "it must not carry a user name or password"],
  [/does not resolve/, "its host does not resolve"],
  [/private address/, "its host is or resolves to a private address"],
];

/** The error of a step whose filled URL the target rules refused; `message`: the rule's own words, which are not quoted. */
export function urlRefused(template: string, message: string): string {
  const reason = URL_REASONS.find(([pattern]) => pattern.test(message))?.[1] ?? "the target is not allowed";
  return `url ${quotedTemplate(template)}: ${reason}`;
}

/** Failures of shared/net/outbound.ts that quote nothing of the request, kept as they are. */
const SAFE_FAILURES: readonly RegExp[] = [/^no answer within \d+ ms$/, /^no connection within \d+ ms$/, /^connection refused$/];

/**
 * The error of a step whose request got no answer; `failure`: shared/net/outbound.ts's words, kept
 * when they quote nothing of the request. A failure it describes in a library's words (which may
 * quote the host or a header) is told by its code alone, with the step's URL template.
 */
export function notAnswered(template: string, failure: string): string {
  if (SAFE_FAILURES.some((pattern) => pattern.test(failure))) return failure;
  if (/does not resolve/.test(failure)) return `url ${quotedTemplate(template)}: the host name does not resolve`;
  if (/not allowed/.test(failure)) return `url ${quotedTemplate(template)}: the host is or resolves to a private address`;
  const code = /^([A-Z][A-Z0-9_]{1,40}):/.exec(failure)?.[1];
  return `url ${quotedTemplate(template)}: the request failed${code ? ` (${code})` : ""}`;
}
