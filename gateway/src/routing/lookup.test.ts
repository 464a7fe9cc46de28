import { describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import type { ParsedBody } from '../request/shape.ts';
import type { Tenant } from '../tenancy/tenant.ts';
import { chooseRoute } from './lookup.ts';
import { StaticRoutingTable, type ModelRoute } from './table.ts';

const route = (deployment: string, model = 'llama'): ModelRoute => ({
  model,
  deployment,
  fingerprint: deployment,
  salt: deployment,
  routing: RoutingSettings.parse({}),
  admission: Admission.parse({}),
  reuse: ResultReuse.parse({}),
  endpoints: [],
});

const tenantOf = (id: string, deployments: string[]): Tenant => ({
  id,
  deployments: new Set(deployments),
  limits: {},
  priority: 0,
});

const ask = (model: string): ParsedBody => ({ kind: 'completion', body: { model, prompt: 'hi' } });

// Namespace team-y took the name first (its route is first and the table's lookup() result).
const table = new StaticRoutingTable([route('team-y/squat'), route('team-x/llama')]);

describe('chooseRoute: a served name belongs to its namespace', () => {
  it("a tenant reaches its own namespace's Deployment, whoever claimed the name first", () => {
    const x = tenantOf('team-x/app', ['team-x/llama']);
    expect(chooseRoute(table, ask('llama'), {}, x).deployment).toBe('team-x/llama');
    const y = tenantOf('team-y/app', ['team-y/squat']);
    expect(chooseRoute(table, ask('llama'), {}, y).deployment).toBe('team-y/squat');
  });

  it('a tenant that may use none of the claims is refused', () => {
    const z = tenantOf('team-z/app', ['team-z/other']);
    expect(() => chooseRoute(table, ask('llama'), {}, z)).toThrow(
      expect.objectContaining({ code: 'GW_MODEL_FORBIDDEN' }),
    );
  });

  it('an open gateway refuses to guess between namespaces and names them', () => {
    expect(() => chooseRoute(table, ask('llama'), {}, undefined)).toThrow(
      expect.objectContaining({
        code: 'GW_MODEL_AMBIGUOUS',
        statusCode: 409,
        message: expect.stringContaining('team-x, team-y'),
      }),
    );
  });

  it('an open gateway routes to the namespace the client names', () => {
    const headers = { 'x-cacheroute-namespace': 'team-x' };
    expect(chooseRoute(table, ask('llama'), headers, undefined).deployment).toBe('team-x/llama');
    expect(() => chooseRoute(table, ask('llama'), { 'x-cacheroute-namespace': 'team-q' }, undefined)).toThrow(
      expect.objectContaining({ code: 'GW_MODEL_NOT_FOUND' }),
    );
  });

  it('a name served in one namespace needs no header', () => {
    const single = new StaticRoutingTable([route('team-x/llama'), route('team-y/other', 'qwen')]);
    expect(chooseRoute(single, ask('llama'), {}, undefined).deployment).toBe('team-x/llama');
  });
});
