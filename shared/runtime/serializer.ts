import { Serializers } from "moleculer";
import { Packr } from "msgpackr";

/**
 * msgpackr decodes a map key `__proto__` as `__proto_` (so that decoding never sets a prototype).
 * In JSON `"__proto__"` is an ordinary key, and clients' data may hold it: keys made of `__proto`
 * and underscores travel with two more underscores and lose them on arrival, so the wire never
 * carries `__proto__` itself and `__proto_` stays itself. Only a packet whose bytes hold
 * `__proto_` somewhere is walked (on either side); every other one costs a byte search.
 */
const PROTO_BYTES = Buffer.from("__proto_");
const PROTO_KEY = /^__proto_+$/;
/** `__proto` and three or more underscores: an escaped key on the wire. */
const ESCAPED_LENGTH = "__proto___".length;

const isPlain = (v: object): boolean => {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/** A copy of `value` with its plain objects' keys renamed; other objects (Buffers, Dates) as they are. */
function renameKeys(value: unknown, rename: (key: string) => string): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((v) => renameKeys(v, rename));
  if (!isPlain(value)) return value;
  // Object.fromEntries defines each key as an own member, `__proto__` included.
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [PROTO_KEY.test(k) ? rename(k) : k, renameKeys(v, rename)]));
}

const escapeKey = (key: string): string => `${key}__`;
const unescapeKey = (key: string): string => (key.length >= ESCAPED_LENGTH ? key.slice(0, -2) : key);

/**
 * The cluster's wire format: MessagePack through msgpackr. Records are off so every packet is
 * self-describing (nodes share no structure table), and maps decode as plain objects.
 */
export class MsgpackrSerializer extends Serializers.Base {
  private readonly packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

  override serialize(obj: Record<string, any>): Buffer {
    const buf = this.packr.pack(obj);
    return buf.includes(PROTO_BYTES) ? this.packr.pack(renameKeys(obj, escapeKey)) : buf;
  }

  override deserialize(buf: Buffer): any {
    const obj = this.packr.unpack(buf);
    return buf.includes(PROTO_BYTES) ? renameKeys(obj, unescapeKey) : obj;
  }
}
