import { lookup as dnsLookup, promises as dns, type LookupAddress, type LookupOptions } from "node:dns";
import { BlockList, isIP } from "node:net";
import { ApiError } from "./errors";

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
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
  ["2001:db8::", 32], // documentation
] as const) {
  blocked.addSubnet(net, prefix, "ipv6");
}

/** The IPv4 address an IPv6 one embeds (mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`), if any. */
function embeddedV4(ip: string): string | undefined {
  const lower = ip.toLowerCase();
  const dotted = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (!hex) return undefined;
  const [hi, lo] = [parseInt(hex[1], 16), parseInt(hex[2], 16)];
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** True for any address a webhook must not reach: loopback, private, link-local, reserved, … */
export function isPrivateAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return blocked.check(ip, "ipv4");
  if (family !== 6) return true;
  const v4 = embeddedV4(ip);
  if (v4 !== undefined) return blocked.check(v4, "ipv4");
  return blocked.check(ip, "ipv6");
}

export interface TargetRules {
  allowPrivate: boolean;
  environment: "live" | "test";
}

const refuse = (message: string) => new ApiError("url_not_allowed", message, { param: "url" });
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
  if (url.protocol === "http:" && rules.environment !== "test") throw refuse("webhook URLs must use https (http is accepted in the test environment only)");
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
  const inner = addresses.find(isPrivateAddress);
  if (inner !== undefined) throw refuse(`the host resolves to a private, loopback or reserved address (${inner})`);
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
        const inner = list.find((a) => isPrivateAddress(a.address));
        if (inner) {
          const refused: NodeJS.ErrnoException = new Error(`target address not allowed: ${hostname} resolves to ${inner.address}`);
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
