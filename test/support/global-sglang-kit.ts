// vitest globalSetup of the conformance suites: the pinned SGLang installed
// once, before any suite calls the kit (a cold install takes minutes).
import { ensureSglangKit } from './sglang-kit.ts';

export function setup(): void {
  process.env['SGLANG_KIT_VENV'] = ensureSglangKit();
}
