// Structured JSON logger: one JSON object per line on stderr (or an injected sink),
// levels, and child loggers that carry fields. Injected everywhere; no console.log.

export const LogLevel = { debug: 10, info: 20, warn: 30, error: 40 } as const;
export type LogLevel = keyof typeof LogLevel;

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
  isEnabled(level: LogLevel): boolean;
}

export interface LoggerOptions {
  level?: LogLevel;
  fields?: LogFields;
  // Where lines go; default process.stderr.
  write?: (line: string) => void;
  now?: () => Date;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const min = LogLevel[opts.level ?? 'info'];
  const write = opts.write ?? ((line: string): void => void process.stderr.write(line));
  const now = opts.now ?? ((): Date => new Date());
  return buildLogger(min, opts.fields ?? {}, write, now);
}

// A logger that drops everything; the default where a logger is optional.
export const noopLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => noopLogger,
  isEnabled: () => false,
};

function buildLogger(min: number, base: LogFields, write: (line: string) => void, now: () => Date): Logger {
  const emit = (level: LogLevel, msg: string, fields?: LogFields): void => {
    if (LogLevel[level] < min) return;
    const record = { time: now().toISOString(), level, msg, ...base, ...normalizeFields(fields) };
    write(`${safeStringify(record)}\n`);
  };
  return {
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    child: (fields) => buildLogger(min, { ...base, ...normalizeFields(fields) }, write, now),
    isEnabled: (level) => LogLevel[level] >= min,
  };
}

// Errors do not serialise to JSON on their own; keep message, name and the cause chain.
function normalizeFields(fields: LogFields | undefined): LogFields {
  if (!fields) return {};
  const out: LogFields = {};
  for (const [k, v] of Object.entries(fields)) out[k] = v instanceof Error ? describeError(v) : v;
  return out;
}

export function describeError(err: Error, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = { name: err.name, message: err.message };
  if (err.cause instanceof Error && depth < 5) out['cause'] = describeError(err.cause, depth + 1);
  return out;
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  } catch {
    return JSON.stringify({ level: 'error', msg: 'unserialisable log record' });
  }
}

export function parseLogLevel(value: string | undefined, fallback: LogLevel = 'info'): LogLevel {
  return value !== undefined && value in LogLevel ? (value as LogLevel) : fallback;
}
