import { describe, expect, inject, it } from 'vitest';
import { createUserKubeconfig } from '../../support/controlplane.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';

describe('integration control plane', () => {
  const kubeconfig = inject('kubeconfig');
  const controlPlane = inject('controlPlane');

  it('answers and reports the version it was built as', async () => {
    const out = await kubectlOk(['version', '--output=json'], { kubeconfig });
    const { serverVersion } = JSON.parse(out) as { serverVersion: { gitVersion: string } };
    expect(serverVersion.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
    expect(serverVersion.gitVersion).toBe(controlPlane.version);
    expect(process.env['KUBECONFIG']).toBe(kubeconfig);
  });

  it('forbids a non-admin identity to list secrets until a Role grants it', async () => {
    const ns = await createTestNamespace(kubeconfig);
    const user = `alice-${ns}`;
    const userKubeconfig = await createUserKubeconfig(controlPlane, { user, groups: ['cacheroute:testers'] });

    const whoami = await kubectlOk(['auth', 'whoami', '--output=json'], { kubeconfig: userKubeconfig });
    expect(JSON.parse(whoami)).toMatchObject({
      status: {
        userInfo: {
          username: user,
          groups: expect.arrayContaining(['cacheroute:testers', 'system:authenticated']) as unknown,
        },
      },
    });
    const denied = await kubectl(['get', 'secrets', `--namespace=${ns}`], { kubeconfig: userKubeconfig });
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(`User "${user}" cannot list resource "secrets"`);

    await kubectlOk(
      ['create', 'role', 'secret-reader', '--verb=get,list', '--resource=secrets', `--namespace=${ns}`],
      { kubeconfig },
    );
    await kubectlOk(
      [
        'create',
        'rolebinding',
        'alice-reads-secrets',
        '--role=secret-reader',
        `--user=${user}`,
        `--namespace=${ns}`,
      ],
      {
        kubeconfig,
      },
    );

    await eventually(async () => {
      const allowed = await kubectl(['get', 'secrets', `--namespace=${ns}`], { kubeconfig: userKubeconfig });
      expect(allowed.stderr).not.toContain('forbidden');
      expect(allowed.code).toBe(0);
    });
    // The grant is namespaced: elsewhere the user is still forbidden.
    const elsewhere = await kubectl(['get', 'secrets', '--namespace=default'], {
      kubeconfig: userKubeconfig,
    });
    expect(elsewhere.code).not.toBe(0);
    expect(elsewhere.stderr).toContain('forbidden');
  });
});
