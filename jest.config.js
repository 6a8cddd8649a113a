/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  transform: { "^.+\\.ts$": ["ts-jest", { tsconfig: "tsconfig.json" }] },
  testTimeout: 30000,
  // Suites start brokers, HTTP servers and child processes: two at a time fits a 2-core machine.
  maxWorkers: 2,
};
