// Media a request gives by reference. SGLang 0.5.23 loads an image, video or
// audio item from whatever string it is handed (utils/common.py load_image,
// load_video, load_audio): an http(s) URL it downloads, a file:// URL or a path
// it opens on the runtime's own filesystem, a `data:` URL it decodes. A
// reference makes a GPU pod fetch from inside the cluster on a client's behalf;
// only a `data:` URL is the client's own bytes. A bare base64 string is
// refused with the references: SGLang tells it from a path only by trying, and
// a path can be spelt in base64's alphabet.

import type { ParsedBody } from './shape.ts';

/** SGLang's own test (`startswith("data:")`, case and all): anything else is loaded as a reference. */
export function isInlineMedia(value: string): boolean {
  return value.startsWith('data:');
}

/** Chat content parts that carry media: the part's `<type>` member holds `{url}` (or, loosely, the URL). */
const CHAT_MEDIA_PARTS = ['image_url', 'video_url', 'audio_url'] as const;
/** /generate's media fields: an item, a list of items, or a list of lists (one per prompt of a batch). */
const GENERATE_MEDIA_FIELDS = ['image_data', 'video_data', 'audio_data'] as const;

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** The path of the first media reference in the request (e.g. `messages[0].content[1].image_url.url`). */
export function findMediaReference(parsed: ParsedBody): string | undefined {
  switch (parsed.kind) {
    case 'chat':
      return findInMessages(parsed.body.messages);
    case 'completion':
      return undefined;
    case 'generate': {
      const body = parsed.body as Record<string, unknown>;
      for (const field of GENERATE_MEDIA_FIELDS) {
        const found = findInItems(body[field], field);
        if (found) return found;
      }
      return undefined;
    }
  }
}

function findInMessages(messages: readonly { content?: unknown }[]): string | undefined {
  for (const [m, message] of messages.entries()) {
    if (!Array.isArray(message.content)) continue;
    for (const [p, part] of (message.content as unknown[]).entries()) {
      if (!isObject(part)) continue;
      for (const key of CHAT_MEDIA_PARTS) {
        const media = part[key];
        const path = `messages[${m}].content[${p}].${key}`;
        if (typeof media === 'string' && !isInlineMedia(media)) return path;
        if (isObject(media) && typeof media['url'] === 'string' && !isInlineMedia(media['url']))
          return `${path}.url`;
      }
    }
  }
  return undefined;
}

/** An item is a string, or an object whose `url` SGLang loads (its ImageData and VideoData). */
function findInItems(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return isInlineMedia(value) ? undefined : path;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = findInItems(item, `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  if (isObject(value) && typeof value['url'] === 'string')
    return isInlineMedia(value['url']) ? undefined : `${path}.url`;
  return undefined;
}
