/**
 * Imported first by every entry point: compiled to CommonJS, imports run in order, so this runs
 * before anything that needs the project's Node is loaded (on an older one, undici fails to load
 * with an error that names nothing useful).
 */
const NEEDED_MAJOR = 24;
if (Number(process.versions.node.split(".")[0]) < NEEDED_MAJOR) {
  const script = process.argv[1] ?? "dist/bin/server.js";
  process.stderr.write(
    `This needs Node.js ${NEEDED_MAJOR} or newer, not ${process.versions.node}: use npm start / npm run cli, or the project's Node: node_modules/.bin/node ${script}\n`,
  );
  process.exit(1);
}

export {};
