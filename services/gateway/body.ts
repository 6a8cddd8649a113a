import type { IncomingMessage } from "node:http";
import { ApiError } from "../../shared/errors";

export const BODY_LIMIT = 1024 * 1024;

const hasBody = (req: IncomingMessage): boolean =>
  req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

const tooLarge = () => new ApiError("payload_too_large", `The request body is over ${BODY_LIMIT} bytes (1 MiB)`);

/**
 * The request's JSON object, or undefined when it sent no body. Refuses other media types (415),
 * bodies over 1 MiB (413, without reading them whole) and anything but a JSON object (400).
 */
export async function readJsonBody(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  if (!hasBody(req)) return undefined;
  if (!JSON_TYPE.test(req.headers["content-type"] ?? "")) {
    throw new ApiError("unsupported_media_type", "Request bodies must be JSON, sent with Content-Type: application/json");
  }
  if (Number(req.headers["content-length"] ?? 0) > BODY_LIMIT) throw tooLarge();
  const raw = await new Promise<Buffer>((ok, fail) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= BODY_LIMIT) return void chunks.push(chunk);
      // Stop keeping it, but drain the rest so the 413 can still be written on this socket.
      req.off("data", onData);
      req.resume();
      fail(tooLarge());
    };
    req.on("data", onData);
    req.once("end", () => ok(Buffer.concat(chunks, size)));
    req.once("error", fail);
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new ApiError("invalid_json", "The request body is not valid JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ApiError("invalid_json", "The request body must be a JSON object");
  }
  return parsed as Record<string, unknown>;
}
