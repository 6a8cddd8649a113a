import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

// The dashboard is served by the gateway under /dashboard/ and calls only the /v1 API of the same
// origin. `npm run build` writes it to dist/dashboard, next to the compiled services.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/dashboard/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../dist/dashboard", import.meta.url)),
    emptyOutDir: true,
    // The CSP allows no inline script: keep the module preload polyfill out of index.html.
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 200,
  },
  server: {
    // `npx vite dashboard` during development: the API is the gateway of `npm start`.
    proxy: { "/v1": "http://127.0.0.1:3000" },
  },
});
