// A request whose answer is deterministic (reuse/) and that the picker found
// nowhere stored: forwarded once, its answer stored when it may be (served.ts
// isStorable) and handed to the identical requests that waited for it.

import type { ReuseTicket } from '../picker/types.ts';
import type { ModelRoute } from '../routing/table.ts';
import { isStorable, toServed, toStored, type Buffered, type Served } from './served.ts';

export async function serveReusable(
  ticket: ReuseTicket,
  route: ModelRoute,
  forward: () => Promise<Buffered>,
): Promise<Served> {
  let produced: Buffered;
  try {
    produced = await forward();
  } catch (err) {
    await ticket.fail();
    throw err;
  }
  await ticket.settle(isStorable(produced, route) ? toStored(produced) : undefined);
  return toServed(produced);
}
