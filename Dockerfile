# One image for every service; SERVICES picks what a container runs (see docker-compose.yml).

# Build: the TypeScript compiled with the dev tool chain, and the dashboard bundled by Vite.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json moleculer.config.ts ./
COPY app app
COPY bin bin
COPY services services
COPY shared shared
COPY tools tools
COPY bench bench
COPY dashboard dashboard
RUN node_modules/.bin/tsc -p tsconfig.build.json && node_modules/.bin/vite build dashboard --logLevel warn

# Production dependencies only.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:24-bookworm-slim
ENV NODE_ENV=production PORT=3000 HOST=0.0.0.0
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY package.json ./
USER node
EXPOSE 3000
CMD ["node", "dist/bin/server.js"]
