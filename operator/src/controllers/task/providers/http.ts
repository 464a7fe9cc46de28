// One JSON POST for providers: bounded by a timeout, never retried, the body
// checked with zod by the caller. Errors carry a stable code and never any
// header value (the API key travels only in the Authorization header, and
// every error text is scrubbed of the secrets given).
import type { z } from 'zod';
import { TaskReason } from '../attempt/reasons.ts';
import { err, ok, type AttemptError, type Result } from '../attempt/types.ts';

export interface PostOptions {
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  headers?: Record<string, string>;
  /** Values that must never appear in an error message. */
  secrets?: readonly string[];
}

export function scrub(text: string, secrets: readonly string[] = []): string {
  return secrets.filter((s) => s.length > 0).reduce((t, s) => t.split(s).join('[redacted]'), text);
}

export function providerError(
  code: string,
  message: string,
  secrets?: readonly string[],
): { ok: false; error: AttemptError } {
  return err({ reason: TaskReason.ProviderError, code, message: scrub(message, secrets) });
}

/** POSTs JSON; returns the parsed JSON of a 2xx answer (shape unchecked) or a ProviderError. */
export async function postJson(
  url: string,
  body: unknown,
  opts: PostOptions,
): Promise<Result<unknown, AttemptError>> {
  const signals = [AbortSignal.timeout(opts.timeoutMs)];
  if (opts.signal) signals.push(opts.signal);
  const where = `POST ${new URL(url).pathname}`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...opts.headers },
      body: JSON.stringify(body),
      signal: AbortSignal.any(signals),
      redirect: 'error',
    });
  } catch (e) {
    const name = (e as Error).name;
    const code = name === 'TimeoutError' || name === 'AbortError' ? 'Timeout' : 'Unreachable';
    return providerError(code, `${where}: ${(e as Error).message}`, opts.secrets);
  }
  let text: string;
  try {
    text = await res.text();
  } catch (e) {
    return providerError('ReadFailed', `${where}: ${(e as Error).message}`, opts.secrets);
  }
  // Upstream error bodies are not copied into status: only the status code.
  if (!res.ok) return providerError(`HTTP${res.status}`, `${where}: HTTP ${res.status}`, opts.secrets);
  try {
    return ok(JSON.parse(text) as unknown);
  } catch {
    return providerError('NotJson', `${where}: response is not JSON`, opts.secrets);
  }
}

export function parseWith<S extends z.ZodType>(
  schema: S,
  value: unknown,
  what: string,
): Result<z.infer<S>, AttemptError> {
  const r = schema.safeParse(value);
  if (r.success) return ok(r.data);
  const issue = r.error.issues[0];
  return providerError(
    'BadResponse',
    `${what}: unexpected shape at ${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`,
  );
}
