import { describe, expect, it } from 'vitest';
import {
  buildContainerdConfig,
  buildCtrRunArgs,
  buildCtrSecurityFlags,
  CTR_DEFAULT_CAPABILITIES,
  parseImportOutput,
  parseTaskList,
} from './containerd.ts';
import { parseBuildOutput } from './images.ts';

const DIGEST = `sha256:${'ab'.repeat(32)}`;

describe('buildCtrSecurityFlags', () => {
  it('maps the chart restricted context: read-only, every default capability dropped, default seccomp', () => {
    const flags = buildCtrSecurityFlags({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
      runAsUser: 1000,
    });
    expect(flags.slice(0, 1)).toEqual(['--read-only']);
    expect(flags.filter((f) => f.startsWith('CAP_'))).toEqual([...CTR_DEFAULT_CAPABILITIES]);
    expect(flags).toContain('--seccomp');
    expect(flags).not.toContain('--allow-new-privs');
  });

  it('lets privileges escalate and the root filesystem be written only when the context says so', () => {
    expect(buildCtrSecurityFlags({})).toEqual(['--allow-new-privs']);
    expect(
      buildCtrSecurityFlags({ capabilities: { drop: ['NET_RAW'] }, allowPrivilegeEscalation: false }),
    ).toEqual(['--cap-drop', 'CAP_NET_RAW']);
  });

  it('refuses a seccomp profile ctr cannot load', () => {
    expect(() => buildCtrSecurityFlags({ seccompProfile: { type: 'Localhost' } })).toThrow(/Localhost/);
  });
});

describe('buildCtrRunArgs', () => {
  it('runs detached on the host network with a tmpfs /tmp, read-only binds, then image, name and command', () => {
    const args = buildCtrRunArgs(
      {
        name: 'gw',
        image: 'cacheroute/gateway:dev',
        command: ['/usr/local/bin/node', 'gateway/src/server.ts'],
        securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false },
        mounts: [{ source: '/t/routes.json', destination: '/etc/cacheroute/routes.json' }],
        env: { A: 'b' },
      },
      '/t/gw.log',
    );
    expect(args).toEqual([
      'run',
      '--detach',
      '--log-uri',
      'file:///t/gw.log',
      '--net-host',
      '--read-only',
      '--mount',
      'type=tmpfs,src=tmpfs,dst=/tmp,options=nosuid:nodev:size=64m',
      '--mount',
      'type=bind,src=/t/routes.json,dst=/etc/cacheroute/routes.json,options=rbind:ro',
      '--env',
      'A=b',
      'cacheroute/gateway:dev',
      'gw',
      '/usr/local/bin/node',
      'gateway/src/server.ts',
    ]);
  });
});

describe('buildContainerdConfig', () => {
  it('keeps root, state and both sockets under the dir and leaves the CRI plugin out', () => {
    const toml = buildContainerdConfig('/t/c');
    expect(toml).toContain('root = "/t/c/root"');
    expect(toml).toContain('state = "/t/c/state"');
    expect(toml).toMatch(/\[grpc\]\n {2}address = "\/t\/c\/containerd.sock"/);
    expect(toml).toMatch(/\[ttrpc\]\n {2}address = "\/t\/c\/containerd.ttrpc.sock"/);
    expect(toml).toContain('disabled_plugins = ["io.containerd.grpc.v1.cri"]');
  });
});

describe('ctr output', () => {
  it('reads tasks from ctr task ls', () => {
    const text =
      'TASK         PID     STATUS    \nsimulator    58      RUNNING\ngateway      91      STOPPED\n';
    expect(parseTaskList(text)).toEqual([
      { name: 'simulator', pid: 58, status: 'RUNNING' },
      { name: 'gateway', pid: 91, status: 'STOPPED' },
    ]);
    expect(parseTaskList('TASK    PID    STATUS    \n')).toEqual([]);
  });

  it('reads the imported image and its digest from ctr images import', () => {
    expect(parseImportOutput(`unpacking cacheroute/simulator:dev (${DIGEST})...done\n`)).toEqual([
      { ref: 'cacheroute/simulator:dev', digest: DIGEST },
    ]);
  });
});

describe('parseBuildOutput', () => {
  it('reads name, archive and digest per line', () => {
    expect(parseBuildOutput(`operator /c/operator-1.oci.tar ${DIGEST}\n`)).toEqual([
      { name: 'operator', archive: '/c/operator-1.oci.tar', digest: DIGEST },
    ]);
  });

  it('refuses an unknown image or a digest that is not one', () => {
    expect(() => parseBuildOutput(`router /c/r.oci.tar ${DIGEST}`)).toThrow(/unknown image router/);
    expect(() => parseBuildOutput('gateway /c/g.oci.tar sha256:abc')).toThrow(/not a digest/);
  });
});
