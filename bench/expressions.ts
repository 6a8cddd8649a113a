/**
 * The cost of the worst expressions (bench/expression-cases.ts) on the largest input: CPU per
 * evaluation (or per refusal, for one stopped by the step budget), against the bound of 5 ms the
 * docs state (docs/workflows/language.md), and as a ratio to parsing that input's JSON, measured in
 * the same run.
 *
 *   npm run --silent build && node dist/bench/expressions.js      (RUNS=50)
 */
import { compile, evaluate, ExpressionError, toCel } from "../services/workflows/expressions/cel";
import { inputs, worst } from "./expression-cases";

const RUNS = Number(process.env.RUNS ?? 50);
const BOUND_MS = 5;

function cpuMs(f: () => void): number {
  f(); // the first run compiles the library's paths
  const start = process.cpuUsage();
  for (let i = 0; i < RUNS; i++) f();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / RUNS;
}

let worstMs = 0;
for (const [source, which] of worst) {
  const text = JSON.stringify(inputs[which]);
  const parse = cpuMs(() => JSON.parse(text));
  const compiled = compile(source, "step");
  const vars = { input: toCel(inputs[which]) };
  let outcome = "evaluated";
  const ms = cpuMs(() => {
    try {
      evaluate(compiled, vars);
    } catch (err) {
      if (!(err instanceof ExpressionError)) throw err;
      outcome = "refused";
    }
  });
  worstMs = Math.max(worstMs, ms);
  console.log(
    `${ms.toFixed(2).padStart(6)} ms  ${(ms / parse).toFixed(1).padStart(6)}x JSON.parse  ${outcome.padEnd(9)} ${source.slice(0, 70)}`,
  );
}
console.log(`worst ${worstMs.toFixed(2)} ms of CPU per evaluation; bound ${BOUND_MS} ms: ${worstMs < BOUND_MS ? "within" : "OVER"}`);
