import { defineConfig } from 'vitest/config';

// Four suites: unit tests beside their source; integration against a real
// kube-apiserver + etcd; e2e with the full control plane, KWOK and simulators;
// conformance against the pinned SGLang's own code and its real server on CPU.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: [
            'lib/**/*.test.ts',
            'operator/**/*.test.ts',
            'fetcher/**/*.test.ts',
            'gateway/**/*.test.ts',
            'test/sim/**/*.test.ts',
            'hack/**/*.test.ts',
            'test/bench/**/*.test.ts',
            'test/support/**/*.test.ts',
          ],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/global-controlplane.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'conformance',
          include: ['test/conformance/**/*.test.ts'],
          globalSetup: ['test/support/global-sglang-kit.ts'],
          testTimeout: 600_000,
          hookTimeout: 900_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
