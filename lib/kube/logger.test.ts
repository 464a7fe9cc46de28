import { describe, expect, it } from 'vitest';
import { createLogger, parseLogLevel } from './logger.ts';

describe('logger', () => {
  it('writes one JSON line per record, with child fields, levels and errors with causes', () => {
    const lines: string[] = [];
    const log = createLogger({
      level: 'info',
      write: (l) => lines.push(l),
      now: () => new Date(0),
      fields: { app: 'op' },
    });
    const child = log.child({ controller: 'deployment' });
    child.debug('hidden');
    child.info('reconciled', { key: 'ns/a' });
    child.error('failed', { error: new Error('outer', { cause: new Error('inner') }) });
    expect(lines.every((l) => l.endsWith('\n'))).toBe(true);
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual([
      {
        time: '1970-01-01T00:00:00.000Z',
        level: 'info',
        msg: 'reconciled',
        app: 'op',
        controller: 'deployment',
        key: 'ns/a',
      },
      {
        time: '1970-01-01T00:00:00.000Z',
        level: 'error',
        msg: 'failed',
        app: 'op',
        controller: 'deployment',
        error: { name: 'Error', message: 'outer', cause: { name: 'Error', message: 'inner' } },
      },
    ]);
    expect(log.isEnabled('debug')).toBe(false);
  });

  it.each([
    ['debug', 'debug'],
    ['nonsense', 'info'],
    [undefined, 'info'],
  ])('parses level %s as %s', (input, level) => {
    expect(parseLogLevel(input)).toBe(level);
  });
});
