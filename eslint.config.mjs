import js from "@eslint/js";
import tseslint from "typescript-eslint";
import prettier from "eslint-config-prettier";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "data/**", "coverage/**", "jest.config.js"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-syntax": [
        "error",
        { selector: "CallExpression[callee.property.name='only'][callee.object.name=/^(it|describe|test)$/]", message: "no focused tests" },
      ],
    },
  },
  // Layout is Prettier's (`npm run format`; `npm run lint` checks it): no lint rule may disagree.
  prettier,
);
