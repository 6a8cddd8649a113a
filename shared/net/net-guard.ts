import { lookup as dnsLookup, promises as dns, type LookupAddress, type LookupOptions } from "node:dns";
import { BlockList, isIP } from "node:net";
import { ApiError } from "../errors";

/**
 * Where webhooks (and workflow HTTP steps) may send: the URL rules of contract section 8 and the
 * SSRF guard. A target must be `https://` (or `http://` in the test environment) and every address
 * its host resolves to must be public. The dispatcher applies the address rule again when it
 * connects (`guardedLookup`), since a name can resolve elsewhere later than at registration.
 */
const blocked = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this" network, unspecified
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["::", 96], // unspecified, loopback and the deprecated IPv4-compatible ::a.b.c.d
  ["64:ff9b:1::", 48], // local-use NAT64 (RFC 8215): translates into private networks
  ["100::", 64], // discard-only
  ["2001::", 23], // IETF protocol assignments: Teredo (2001::/32, its client address obfuscated), benchmarking, ORCHID
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated, still routed inside some networks)
  ["ff00::", 8], // multicast
] as const) {
  blocked.addSubnet(net, prefix, "ipv6");
}

/** The eight 16-bit groups of an IPv6 address (a trailing dotted quad and a zone allowed), if it is one. */
function groupsOf(ip: string): number[] | undefined {
  let text = ip.toLowerCase().split("%")[0];
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const b = quad.slice(1).map(Number);
    if (b.some((x) => x > 255)) return undefined;
    text = `${text.slice(0, quad.index)}${((b[0] << 8) | b[1]).toString(16)}:${((b[2] << 8) | b[3]).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)));
  const head = parse(halves[0]);
  const tail = halves.length === 2 ? parse(halves[1]) : [];
  const fill = 8 - head.length - tail.length;
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined;
  const groups = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

const v4Of = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * The IPv4 address an IPv6 one carries and is routed to: mapped `::ffff:a.b.c.d`, translated
 * `::ffff:0:a.b.c.d` (SIIT), NAT64 `64:ff9b::a.b.c.d`, and 6to4 `2002:aabb:ccdd::/48`.
 */
function embeddedV4(groups: number[]): string | undefined {
  const zero = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  if (zero(0, 5) && groups[5] === 0xffff) return v4Of(groups[6], groups[7]);
  if (zero(0, 4) && groups[4] === 0xffff && groups[5] === 0) return v4Of(groups[6], groups[7]);
  if (groups[0] === 0x64 && groups[1] === 0xff9b && zero(2, 6)) return v4Of(groups[6], groups[7]);
  if (groups[0] === 0x2002) return v4Of(groups[1], groups[2]);
  return undefined;
}

/** True for any address a webhook must not reach: loopback, private, link-local, reserved, … */
export function isPrivateAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return blocked.check(ip, "ipv4");
  if (family !== 6) return true;
  const groups = groupsOf(ip);
  if (groups === undefined) return true;
  const v4 = embeddedV4(groups);
  if (v4 !== undefined) return blocked.check(v4, "ipv4");
  return blocked.check(groups.map((g) => g.toString(16)).join(":"), "ipv6");
}

export interface TargetRules {
  allowPrivate: boolean;
  environment: "live" | "test";
}

const refuse = (message: string) => new ApiError("url_not_allowed", message, { param: "url" });
/** Said with every refusal a local setup meets, so the setting that lifts it is named where it is needed. */
const LOCAL_USE = "for local use only, start the server with WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow it";
const invalid = (message: string) => new ApiError("parameter_invalid", message, { param: "url" });

const defaultResolve = async (host: string): Promise<string[]> =>
  (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** The URL, checked against the rules; throws the 400 a client should see. */
export async function checkTargetUrl(raw: string, rules: TargetRules, resolve = defaultResolve): Promise<URL> {
  if (typeof raw !== "string" || raw.length > 2048) throw invalid("url must be an absolute URL of at most 2048 characters");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(`'${raw.slice(0, 100)}' is not an absolute URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw refuse(`webhook URLs must use https (got ${url.protocol.slice(0, -1)})`);
  if (url.username || url.password) throw invalid("url must not carry a user name or password");
  if (rules.allowPrivate) return url;
  if (url.protocol === "http:" && rules.environment !== "test")
    throw refuse(`webhook URLs must use https (http is accepted in the test environment only); ${LOCAL_USE}`);
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else {
    try {
      addresses = await resolve(host);
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) throw refuse(`the host '${host}' does not resolve`);
  }
  // Which address is not said: the answer would map the platform's own network for a caller.
  if (addresses.some(isPrivateAddress)) throw refuse(`the host resolves to a private address; ${LOCAL_USE}`);
  return url;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for sockets (undici's `connect.lookup`) that refuses private addresses at connect
 * time, unless `allowPrivate`. Errors carry code `ERR_URL_NOT_ALLOWED`.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const list = addresses as LookupAddress[];
      if (!allowPrivate) {
        if (list.some((a) => isPrivateAddress(a.address))) {
          const refused: NodeJS.ErrnoException = new Error(`target address not allowed: ${hostname} resolves to a private address`);
          refused.code = "ERR_URL_NOT_ALLOWED";
          return callback(refused, []);
        }
      }
      if (options.all) return callback(null, list);
      const [first] = list;
      if (!first) return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: "ENOTFOUND" }), []);
      callback(null, first.address, first.family);
    });
  };
}
