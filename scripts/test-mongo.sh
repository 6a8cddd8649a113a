#!/usr/bin/env bash
# `npm run test:mongo`: the storage contract suite and the API suites against the MongoDB at
# MONGO_URL (a replica set: see docs/operations/mongodb.md), each platform in a database of its own.
# Extra arguments go to jest. Without MONGO_URL it runs nothing and says so.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ -z "${MONGO_URL:-}" ]; then
  echo "test:mongo: SKIPPED, nothing was run against MongoDB: MONGO_URL is not set."
  echo "  Start a single-node replica set and point MONGO_URL at it; docs/operations/mongodb.md says how."
  exit 0
fi

# Suites that read or break the embedded store's file directly: they test SQLite, not the platform
# over any store.
SQLITE_ONLY=(
  test/api/storage-full.test.ts # fills a tmpfs under DATA_DIR
  test/api/secrets.test.ts      # reads the database file's bytes for secrets at rest
  test/api/outbox.test.ts       # opens the SQLite file beside a running platform
  test/api/retention.test.ts    # writes aged documents into the SQLite file
  test/api/gateway-defences.test.ts # one case opens the SQLite file
  test/api/newcomer.test.ts     # runs bin/ processes on a DATA_DIR
)

# Reachable, a replica set, and no databases left by an earlier run.
node -e '
const mongoose = require("mongoose");
(async () => {
  const conn = await mongoose.createConnection(process.env.MONGO_URL, { serverSelectionTimeoutMS: 5000 }).asPromise();
  const hello = await conn.db.admin().command({ hello: 1 });
  if (!hello.setName && hello.msg !== "isdbgrid") throw new Error("it is a standalone server; the platform needs a replica set");
  const { databases } = await conn.db.admin().listDatabases({ nameOnly: true });
  for (const { name } of databases) if (/^wfp_(test|contract)_/.test(name)) await conn.useDb(name).dropDatabase();
  console.log(`test:mongo: MongoDB ${hello.setName ? `replica set ${hello.setName}` : "through mongos"} at MONGO_URL`);
  await conn.close();
})().catch((err) => { console.error(`test:mongo: cannot use MONGO_URL: ${err.message}`); process.exit(1); });
' || exit 1

npm run --silent build || exit 1
ignore=$(IFS='|'; echo "${SQLITE_ONLY[*]}")
# The storage recount on the store, and as the CLI process that opens the store directly.
CLI_SUITES=(test/integration/storage-recount.test.ts test/cluster/cli-storage-recount.test.ts)
echo "test:mongo: the storage contract suite, ${CLI_SUITES[*]} and test/api/ except: ${SQLITE_ONLY[*]}"
WFP_TEST_STORE=mongo npx jest test/integration/storage.contract.test.ts "${CLI_SUITES[@]}" test/api --testPathIgnorePatterns "$ignore" "$@"
