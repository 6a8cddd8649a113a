import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { ERROR_CODES } from "../../shared/errors";
import { newId } from "../../shared/ids";
import type { GatewayPart } from "./gateway.types";

/**
 * The gateway's HTTP server: node:http, with every request handed to `httpHandler`
 * (pipeline.mixin.ts). It listens once the service starts and closes after the service's own
 * `stopped` has run (a mixin's `stopped` runs after the schema's), so the gateway can first mark
 * itself stopping and close idle connections.
 *
 * Node's own time-outs bound a slow client: `headersTimeout` for the request's head (answered 408
 * in the contract's shape), `requestTimeout` as a backstop for the whole request (the body reader
 * answers a slow body first), and malformed requests or oversized heads 400 / 431.
 *
 * (moleculer-web's per-request pipeline cost too much of the latency budget to keep: see
 * docs/decisions/0020-gateway-http-server.md.)
 */
export const HttpServerMixin: GatewayPart = {
  methods: {
    configureServer(server, headersTimeoutMs, bodyTimeoutMs) {
      server.headersTimeout = headersTimeoutMs;
      server.requestTimeout = headersTimeoutMs + bodyTimeoutMs + 1_000;
      // How often Node looks for expired requests (its default, 30 s, would add up to that much).
      server.connectionsCheckingInterval = Math.min(1_000, Math.max(50, Math.floor(headersTimeoutMs / 4)));
      server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
        // A socket with an answer under way (or gone) cannot take another.
        const busy = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
        if (!socket.writable || busy) return void socket.destroy();
        let head = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n";
        if (err.code === "HPE_HEADER_OVERFLOW") head = "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n";
        if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
          const requestId = newId("req");
          const message = `The request's headers did not arrive within ${headersTimeoutMs} ms`;
          const payload = JSON.stringify({
            error: { type: ERROR_CODES.request_timeout.type, code: "request_timeout", message, request_id: requestId },
          });
          head = `HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nRequest-Id: ${requestId}\r\nConnection: close\r\n\r\n${payload}`;
        }
        socket.write(head, () => socket.destroy());
      });
    },
  },

  created() {
    const { config } = this.settings;
    this.server = createServer((req, res) => void this.httpHandler(req, res));
    this.configureServer(this.server, config.httpHeadersTimeoutMs, config.httpBodyTimeoutMs);
  },

  started() {
    const server: Server = this.server;
    return new Promise<void>((ok, fail) => {
      const failed = (err: Error) =>
        fail(new Error(`The HTTP server cannot listen on ${this.settings.ip}:${this.settings.port}: ${err.message}`));
      server.once("error", failed);
      server.listen(this.settings.port, this.settings.ip, () => {
        server.off("error", failed);
        server.on("error", (err) => this.logger.error("HTTP server error", err));
        ok();
      });
    });
  },

  stopped() {
    const server: Server = this.server;
    if (!server.listening) return;
    return new Promise<void>((ok) => server.close(() => ok()));
  },
};
