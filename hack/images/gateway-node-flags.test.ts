import { describe, expect, it } from 'vitest';
import { gatewayNodeFlags, parseEntrypointNodeFlags } from './gateway-node-flags.ts';

describe('parseEntrypointNodeFlags', () => {
  it('takes the flags between node and the script', () => {
    const file = 'FROM x\nENTRYPOINT ["/usr/local/bin/node", "--a=1", "--b", "gateway/src/server.ts"]\n';
    expect(parseEntrypointNodeFlags(file)).toEqual(['--a=1', '--b']);
  });

  it('refuses a file without an exec-form entrypoint', () => {
    expect(() => parseEntrypointNodeFlags('FROM x\n')).toThrow(/no ENTRYPOINT/);
    expect(() => parseEntrypointNodeFlags('ENTRYPOINT ["node"]\n')).toThrow(/no script/);
  });

  it("reads the gateway image's own flags", () => {
    expect(gatewayNodeFlags()).toContain('--max-semi-space-size=32');
  });
});
