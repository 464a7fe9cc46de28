// SGLang's --kv-events-config as the tests set it: a ZMQ publisher of KV
// events and, unless told otherwise, its replay socket. The real server binds
// the ports it is given (ports free now: fresh-ports.ts); the simulator binds
// its event sockets on ports the kernel picks (--sim-ephemeral-event-ports,
// which startSim always passes), so its configured ports are placeholders,
// read back from the running simulator (sim/testing.ts startSimWithKvEvents).

/** Configured ports the simulator does not bind (it binds on ports the kernel picks). */
export const PLACEHOLDER_EVENT_PORTS = { kv: 5557, replay: 5558 } as const;

export interface KvEventsConfig {
  /** The KV event socket's port (tcp://*:kv). */
  readonly kv: number;
  /** The replay socket's port; absent: no replay. */
  readonly replay?: number;
  /** The ZMQ topic (default 'kv'). */
  readonly topic?: string;
  /** More of SGLang's publisher settings (buffer_steps, ...). */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/** The flags for SGLang's ZMQ KV event publisher on tcp://*:kv (and its replay on tcp://*:replay). */
export function kvEventsConfigArgs({ kv, replay, topic = 'kv', extra }: KvEventsConfig): string[] {
  const config = {
    publisher: 'zmq',
    endpoint: `tcp://*:${kv}`,
    ...(replay !== undefined ? { replay_endpoint: `tcp://*:${replay}` } : {}),
    topic,
    ...extra,
  };
  return ['--kv-events-config', JSON.stringify(config)];
}
