// An admission refusal as the client sees it: the gateway error, its status
// and Retry-After, naming the deployment and the bound it hit.

import { GatewayError } from '../errors/index.ts';
import type { Rejection } from './controller.ts';

export function toGatewayError(
  rejection: Rejection,
  deployment: string,
  queueTimeoutMs: number,
): GatewayError {
  switch (rejection.code) {
    case 'overloaded': {
      const retryAfterSeconds = rejection.retryAfterSeconds;
      return new GatewayError('GW_OVERLOADED', { deployment, retryAfterSeconds }, { retryAfterSeconds });
    }
    case 'queue-timeout':
      return new GatewayError(
        'GW_QUEUE_TIMEOUT',
        { deployment, waitMs: queueTimeoutMs },
        { retryAfterSeconds: rejection.retryAfterSeconds },
      );
    case 'draining':
      return new GatewayError(
        'GW_DRAINING',
        { subject: `Deployment '${deployment}'`, retryAfterSeconds: 1 },
        { retryAfterSeconds: 1 },
      );
    case 'aborted':
      return new GatewayError('GW_CLIENT_CLOSED');
  }
}
