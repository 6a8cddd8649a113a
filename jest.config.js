/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  transform: {
    "^.+\\.ts$": ["ts-jest", { tsconfig: "tsconfig.json" }],
    // An ES module only package: Node requires it as it is, jest's CommonJS loader needs it compiled.
    "/@marcbachmann/cel-js/.+\\.js$": [
      "ts-jest",
      { tsconfig: { allowJs: true, module: "commonjs", moduleResolution: "node", target: "ES2023" }, isolatedModules: true },
    ],
  },
  transformIgnorePatterns: ["/node_modules/(?!@marcbachmann/cel-js/)"],
  testTimeout: 30000,
  // Suites start brokers, HTTP servers and child processes: two at a time fits a 2-core machine.
  maxWorkers: 2,
};
