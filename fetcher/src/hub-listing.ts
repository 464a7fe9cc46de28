// The whole tree listing of a commit: `GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true`,
// every page (the next one behind `Link: <…>; rel="next"`), each checked against the schema
// of hub.ts, each retried on its own.
import { FetchFailure, TransientFailure } from './fetch-reasons.ts';
import { failureForStatus, getFollowingRedirects, headerValue, type HubClient } from './hub-client.ts';
import { HubTreeListing } from './hub.ts';
import { withRetries, type RetryPolicy } from './retry.ts';

const MAX_PAGES = 10_000;

/** The `rel="next"` target of a Link header, resolved against the page's URL. */
export function nextPageUrl(link: string | undefined, base: URL): URL | undefined {
  if (!link) return undefined;
  for (const part of link.matchAll(/<([^>]*)>([^,<]*)/g)) {
    if (/;\s*rel="?next"?(?:\s*;|\s*$)/i.test(part[2] ?? '')) return new URL(part[1] ?? '', base);
  }
  return undefined;
}

async function fetchPage(
  client: HubClient,
  url: URL,
  target: { repo: string; revision: string },
): Promise<{ entries: HubTreeListing; next: URL | undefined }> {
  const res = await getFollowingRedirects(client, url, { headers: { accept: 'application/json' } });
  if (res.statusCode !== 200) throw await failureForStatus(client, res, { kind: 'listing', ...target });
  let text: string;
  try {
    text = await res.body.text();
  } catch (e) {
    throw new TransientFailure(`the file listing of ${target.repo}: ${(e as Error).message}`, { cause: e });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new FetchFailure('HubInvalidListing', `the file listing of ${target.repo} is not JSON`, {
      cause: e,
    });
  }
  const parsed = HubTreeListing.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new FetchFailure(
      'HubInvalidListing',
      `the file listing of ${target.repo} is not the hub's tree listing: at ${JSON.stringify(issue?.path ?? [])}: ${issue?.message ?? 'invalid'}`,
    );
  }
  return { entries: parsed.data, next: nextPageUrl(headerValue(res.headers, 'link'), res.url) };
}

export async function listHubTree(
  client: HubClient,
  target: { repo: string; revision: string },
  retry: RetryPolicy,
  onPage: (entries: number) => void = () => undefined,
): Promise<HubTreeListing> {
  const entries: HubTreeListing = [];
  const seen = new Set<string>();
  let next: URL | undefined = new URL(
    `${client.endpoint}/api/models/${target.repo}/tree/${target.revision}?recursive=true`,
  );
  while (next) {
    const url: URL = next;
    // A Link that points back at a page already read would loop for ever.
    if (seen.has(url.href) || seen.size >= MAX_PAGES)
      throw new FetchFailure('HubInvalidListing', `the file listing of ${target.repo} pages in a loop`);
    seen.add(url.href);
    const page = await withRetries(`the file listing of ${target.repo}`, retry, () =>
      fetchPage(client, url, target),
    );
    entries.push(...page.entries);
    onPage(entries.length);
    next = page.next;
  }
  return entries;
}
