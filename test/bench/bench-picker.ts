// The routing benchmark's `picker` row: the cache-aware gateway as GIE's endpoint picker
// (ext_proc, gateway/src/epp) behind a real Envoy 1.40 (hack/envoy/install.sh), on the same
// simulators the standalone gateway's row replays on. Clients send to Envoy; Envoy asks the
// picker, routes on the header it sets (ORIGINAL_DST) and streams SGLang's answer itself.
// The bootstrap is the one hack/envoy/bootstrap.ts builds, not a second one.

import { startEnvoy } from '../support/envoy.ts';
import { MODEL, startPickerGateway, type FleetContext, type Router, type Sim } from './bench-fleet.ts';
import { stopProcess, waitUntil } from './bench-procs.ts';
import { postStream } from './replay-client.ts';

/** The row's key in the report, beside the standalone gateway's `cache-aware`. */
export const PICKER_ROW = 'picker';

/**
 * Envoy in front of a picker gateway on `sims`, as one Router: clients send to Envoy's
 * listener; the index is read from the gateway's own /status.json; stopping it stops both.
 */
export async function startPickerRouter(
  ctx: FleetContext,
  sims: readonly Sim[],
  tag: string,
): Promise<Router> {
  const picker = await startPickerGateway(ctx, sims, `picker-${tag}`);
  let envoy;
  try {
    // Its own process group, as every router of the bench: stopped with it, its CPU counted alone.
    envoy = await startEnvoy({ kind: 'picker', pickerPort: picker.pickerPort }, { detached: true });
    const url = envoy.url;
    await waitUntil(
      'a request through Envoy and the picker',
      async () => {
        const o = await postStream(new URL('/v1/chat/completions', url), {
          model: MODEL,
          messages: [{ role: 'user', content: 'probe' }],
          max_tokens: 1,
          stream: true,
        });
        if (o.status === 200 && o.error === undefined) return true;
        throw new Error(`${o.status} ${o.error ?? ''}`);
      },
      60_000,
      picker.proc,
      500,
    );
  } catch (e) {
    await envoy?.close();
    await stopProcess(picker.proc);
    throw e;
  }
  ctx.log(`${PICKER_ROW}: Envoy ${envoy.url} (log level warning) asking the picker on :${picker.pickerPort}`);
  const running = envoy;
  return {
    name: PICKER_ROW,
    urls: [running.url],
    procs: [picker.proc],
    kvIndexed: sims.some((s) => s.events),
    statusUrls: [picker.url],
    close: () => running.close(),
  };
}
