import { describe, expect, it } from 'vitest';
import { parseFrontProxyConfig, readProxiedUser } from './front-proxy.ts';

const data = {
  'requestheader-client-ca-file': '-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n',
  'requestheader-allowed-names': '["front-proxy-client"]',
  'requestheader-username-headers': '["X-Remote-User"]',
  'requestheader-group-headers': '["X-Remote-Group"]',
};

describe('the front proxy', () => {
  it('reads the API server’s published settings, and says what is missing', () => {
    const cfg = parseFrontProxyConfig(data);
    expect(cfg).toMatchObject({ ok: true, value: { allowedNames: ['front-proxy-client'] } });
    expect(parseFrontProxyConfig({ 'client-ca-file': 'x' })).toEqual({
      ok: false,
      error: expect.stringContaining('start kube-apiserver with --requestheader-client-ca-file') as unknown,
    });
    expect(
      parseFrontProxyConfig({ ...data, 'requestheader-allowed-names': 'front-proxy-client' }),
    ).toMatchObject({
      ok: false,
      error: expect.stringContaining('requestheader-allowed-names: not a JSON list of strings') as unknown,
    });
  });

  it('names the proxied user only for a verified, allowed certificate', () => {
    const cfg = parseFrontProxyConfig(data);
    if (!cfg.ok) throw new Error(cfg.error);
    const headers = {
      'x-remote-user': ['system:serviceaccount:kube-system:hpa'],
      'x-remote-group': ['system:serviceaccounts', 'system:authenticated'],
    };
    expect(
      readProxiedUser(cfg.value, { authorized: true, commonName: 'front-proxy-client' }, headers),
    ).toEqual({
      ok: true,
      value: {
        name: 'system:serviceaccount:kube-system:hpa',
        groups: ['system:serviceaccounts', 'system:authenticated'],
      },
    });
    expect(
      readProxiedUser(cfg.value, { authorized: false, commonName: 'front-proxy-client' }, headers),
    ).toMatchObject({ ok: false });
    expect(readProxiedUser(cfg.value, { authorized: true, commonName: 'someone-else' }, headers)).toEqual({
      ok: false,
      error: 'client certificate someone-else is not an allowed front proxy',
    });
    expect(
      readProxiedUser(cfg.value, { authorized: true, commonName: 'front-proxy-client' }, {}),
    ).toMatchObject({ ok: false });
    // A name or a group with a comma is one name, one group: each header line is taken whole.
    expect(
      readProxiedUser(
        cfg.value,
        { authorized: true, commonName: 'front-proxy-client' },
        { 'x-remote-user': ['a,b'], 'x-remote-group': ['x,y'] },
      ),
    ).toEqual({ ok: true, value: { name: 'a,b', groups: ['x,y'] } });
  });
});
