// A streamed chat or completion whose client did not ask for usage: the
// gateway asks the runtime for it anyway (stream_options.include_usage), so
// the cache report reaches the index and the tree, and takes the extra event
// out of what the client sees. SGLang sends usage as its own event, with an
// empty `choices`, just before `data: [DONE]`; only that event is dropped.
// Events pass through whole: a partial one waits for its end (clients read
// whole events anyway).

const USAGE_HINTS = ['"usage"', '"choices":[]'];

/** Asks for the usage event when the client did not; true when the gateway must strip it. */
export function requestUsageEvent(body: Record<string, unknown>): boolean {
  const opts = body['stream_options'];
  const asked =
    opts !== null && typeof opts === 'object' && (opts as Record<string, unknown>)['include_usage'];
  if (asked === true) return false;
  body['stream_options'] = {
    ...(typeof opts === 'object' && opts !== null ? opts : {}),
    include_usage: true,
  };
  return true;
}

export class UsageEventFilter {
  readonly #decoder = new TextDecoder();
  readonly #encoder = new TextEncoder();
  #tail = '';

  /** The whole events of `chunk` (with what came before it) the client should see. */
  push(chunk: Uint8Array): Uint8Array {
    this.#tail += this.#decoder.decode(chunk, { stream: true });
    let out = '';
    let cut = this.#tail.indexOf('\n\n');
    while (cut >= 0) {
      const event = this.#tail.slice(0, cut + 2);
      this.#tail = this.#tail.slice(cut + 2);
      if (!isUsageOnlyEvent(event)) out += event;
      cut = this.#tail.indexOf('\n\n');
    }
    return this.#encoder.encode(out);
  }

  /** What is left at the end of the stream (an event without its blank line). */
  flush(): Uint8Array {
    const rest = this.#tail + this.#decoder.decode();
    this.#tail = '';
    return this.#encoder.encode(isUsageOnlyEvent(rest) ? '' : rest);
  }
}

function isUsageOnlyEvent(event: string): boolean {
  if (!event.startsWith('data: ') || !USAGE_HINTS.every((h) => event.includes(h))) return false;
  try {
    const json = JSON.parse(event.slice(6)) as { choices?: unknown; usage?: unknown };
    return Array.isArray(json.choices) && json.choices.length === 0 && json.usage !== undefined;
  } catch {
    return false;
  }
}
