// A request for no route (an unknown path, or a known one with another method)
// is answered 404 from onRequest: before its body is read or parsed, before any
// API key is checked. fastify's not-found route otherwise runs the whole
// lifecycle, parsing up to the body limit of JSON for anyone who asks. The
// unread rest of the body is discarded by Node as it arrives.

import type { FastifyInstance } from 'fastify';
import { buildErrorBody, GatewayError } from '../errors/index.ts';

export function registerEarlyNotFound(app: FastifyInstance): void {
  app.addHook('onRequest', (req, reply, done) => {
    if (!req.is404) {
      done();
      return;
    }
    const err = new GatewayError('GW_NOT_FOUND', { method: req.method, url: req.url });
    void reply.code(err.statusCode).send(buildErrorBody(err));
  });
}
