import { existsSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { dirname, join, sep } from "node:path";
import serveStatic from "serve-static";

export const DASHBOARD_PATH = "/dashboard";

/**
 * Where `npm run build` writes the dashboard: `dist/dashboard` of the project, found from this
 * file whether it runs compiled (dist/services/gateway) or from source (tests).
 */
export function defaultDashboardDir(): string {
  let dir = __dirname;
  while (!existsSync(join(dir, "package.json")) && dirname(dir) !== dir) dir = dirname(dir);
  return join(dir, "dist", "dashboard");
}

/**
 * The browser pages always come from this origin and only ever call the /v1 API of this origin:
 * no inline script, no other host, never framed (the pages show secrets once).
 */
const PAGE_HEADERS: Record<string, string> = {
  "Content-Security-Policy":
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  "Referrer-Policy": "no-referrer",
};

export const isDashboardPath = (path: string): boolean => path === DASHBOARD_PATH || path.startsWith(`${DASHBOARD_PATH}/`);

/**
 * Serves the built single-page dashboard under /dashboard/ (hash routes, so one index.html).
 * Vite names every asset by its content hash: those are cached for a year; index.html never is.
 * Answers false when no file matched (the caller answers its JSON 404).
 */
export function dashboardServer(dir: string): {
  built: boolean;
  serve(req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean>;
} {
  const assets = join(dir, "assets") + sep;
  const files = serveStatic(dir, {
    index: ["index.html"],
    fallthrough: true,
    redirect: false,
    dotfiles: "ignore",
    setHeaders(res, file) {
      for (const [name, value] of Object.entries(PAGE_HEADERS)) res.setHeader(name, value);
      res.setHeader("Cache-Control", file.startsWith(assets) ? "public, max-age=31536000, immutable" : "no-cache");
    },
  });
  const built = existsSync(join(dir, "index.html"));
  return {
    built,
    serve(req, res, path) {
      if (path === DASHBOARD_PATH) {
        res.writeHead(308, { Location: `${DASHBOARD_PATH}/`, "Content-Length": 0 }).end();
        return Promise.resolve(true);
      }
      // serve-static reads req.url: give it the part below /dashboard, query kept.
      const original = req.url ?? "/";
      req.url = original.slice(DASHBOARD_PATH.length) || "/";
      return new Promise<boolean>((resolve, reject) => {
        files(req, res, (err?: unknown) => {
          req.url = original;
          if (err) reject(err);
          else resolve(false);
        });
        res.once("finish", () => resolve(true));
        res.once("close", () => resolve(true));
      });
    },
  };
}
