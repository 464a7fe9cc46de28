import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
      complexity: ['warn', 20],
      'max-depth': ['warn', 4],
    },
  },
  {
    // The gateway may use the operator's API and SGLang contract, never its controllers;
    // its Kubernetes shell (discovery/) also uses the runtime's informers and client, and
    // its tracing start (one OTLP setup for both processes) the runtime's tracing.
    files: ['gateway/**/*.ts'],
    ignores: ['gateway/src/discovery/**', 'gateway/src/tracing/start.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: 'operator/src/(?!api/|sglang/)',
              message:
                'gateway imports operator/src/api and operator/src/sglang only (discovery/ also runtime/)',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['gateway/src/discovery/**/*.ts', 'gateway/src/tracing/start.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: 'operator/src/(?!api/|sglang/|runtime/)',
              message:
                'gateway discovery imports operator/src/api, sglang and runtime only, never controllers',
            },
          ],
        },
      ],
    },
  },
  {
    // What a model digest means (ADR 0013) is shared by the API, the fetch Job and the CLI: it
    // depends on the API types and Node only, never on controllers or the runtime.
    files: ['operator/src/model/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./(?!api/)',
              message: 'operator/src/model imports operator/src/api and node only',
            },
          ],
        },
      ],
    },
  },
  {
    // Its tests may also start the shared test servers of test/support/ (the fetcher's fake hub).
    files: ['operator/src/model/**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./(?!api/|\\.\\./\\.\\./test/support/)',
              message: 'operator/src/model tests import operator/src/api, test/support and node only',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['hack/**/*.ts', 'test/**/*.ts', '**/*.test.ts', 'eslint.config.js', 'vitest.config.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    // vitest's asymmetric matchers (expect.stringContaining, expect.objectContaining) are typed `any`.
    files: ['**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
    },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
);
