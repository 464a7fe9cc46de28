import { describe, expect, it } from 'vitest';
import { checkFetchRequest } from './fetch-request.ts';

const GOOD = {
  endpoint: 'https://huggingface.co/',
  repo: 'meta-llama/Llama-3.1-8B-Instruct',
  revision: '0e9e39f249a16976918f6564b8830bc894c89659',
  digest: `sha256:${'a'.repeat(64)}`,
  tokenizerDigest: `sha256:${'b'.repeat(64)}`,
  dest: '/models/llama',
};

describe('checkFetchRequest', () => {
  it('takes a request pinned to a commit, the endpoint without its trailing slash', () => {
    expect(checkFetchRequest(GOOD)).toEqual({
      ok: true,
      value: { ...GOOD, endpoint: 'https://huggingface.co' },
    });
    expect(
      checkFetchRequest({ ...GOOD, endpoint: 'https://mirror.example/hf/', tokenizerSubpath: 'tok/' }),
    ).toMatchObject({
      ok: true,
      value: { endpoint: 'https://mirror.example/hf', tokenizerSubpath: 'tok' },
    });
  });

  it.each([
    ['revision', 'main', /40-hex commit id to fetch, not a branch or tag like 'main'/],
    ['revision', 'v1.0', /40-hex commit id/],
    ['revision', '0e9e39f', /40-hex commit id/],
    ['revision', '0E9E39F249A16976918F6564B8830BC894C89659', /40-hex commit id/],
    ['revision', undefined, /^is required$/],
    ['digest', 'a'.repeat(64), /sha256: and 64 lower-case hex/],
    ['tokenizerDigest', `sha256:${'A'.repeat(64)}`, /sha256: and 64 lower-case hex/],
    ['endpoint', 'huggingface.co', /http\(s\) URL/],
    ['endpoint', 'ftp://mirror.example', /http\(s\) URL/],
    ['endpoint', 'https://mirror.example/?x=1', /no query/],
    ['repo', 'a/b/c', /repository id/],
    ['repo', 'org/..', /repository id|\.\./],
    ['tokenizerSubpath', '../tok', /relative directory/],
    ['tokenizerSubpath', '.hidden', /relative directory/],
    ['dest', '', /directory/],
  ])('refuses %s %j', (field, value, message) => {
    const r = checkFetchRequest({ ...GOOD, [field]: value });
    expect(r).toMatchObject({ ok: false, error: { field } });
    expect(!r.ok && r.error.message).toMatch(message);
  });
});
