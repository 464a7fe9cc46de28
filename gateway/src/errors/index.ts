// The gateway's error registry: one stable code per failure the client can
// see, with its HTTP status and message template. ERRORS.md documents each
// (errors.test.ts keeps them in step). Bodies use OpenAI's error shape, so
// OpenAI clients show the message; `code` is the stable part to match on.
// Upstream failures never carry upstream text to the client.

export const GatewayErrors = {
  GW_BAD_REQUEST: { status: 400, message: 'Invalid request: {detail}' },
  GW_FIELD_NOT_ALLOWED: {
    status: 400,
    message:
      "Request field '{field}' is not accepted for model '{model}': {why}; remove it, or have the operator allow it in the CachePolicy's spec.requests.{optIn}",
  },
  GW_REQUEST_TOO_LARGE: { status: 400, message: '{subject} is {value}, above {limit} ({cap}); {advice}' },
  GW_NOT_FOUND: { status: 404, message: 'No route {method} {url}' },
  GW_MODEL_NOT_FOUND: {
    status: 404,
    message: "Model '{model}' is not served by this gateway; GET /v1/models lists the served models",
  },
  GW_UNAUTHORIZED: { status: 401, message: 'No valid API key: {detail}' },
  GW_MODEL_FORBIDDEN: {
    status: 403,
    message:
      "Tenant '{tenant}' may not use model '{model}' (Deployment {deployment}); the Tenant's spec.models lists what it may call",
  },
  GW_MODEL_AMBIGUOUS: {
    status: 409,
    message:
      "Model '{model}' is served in namespaces {namespaces}; name one with the x-cacheroute-namespace header",
  },
  GW_RATE_LIMITED: {
    status: 429,
    message: "Tenant '{tenant}' is over its {limit} per minute ({value}); retry after {retryAfterSeconds} s",
  },
  GW_PAYLOAD_TOO_LARGE: { status: 413, message: 'Request body is larger than {limitBytes} bytes' },
  GW_HEADERS_TOO_LARGE: {
    status: 431,
    message: 'Request line and headers together are larger than {limitBytes} bytes',
  },
  GW_OVERLOADED: {
    status: 429,
    message:
      "Deployment '{deployment}' is at its concurrency and queue bound; retry after {retryAfterSeconds} s",
  },
  GW_NO_ENDPOINT: {
    status: 503,
    message: "Model '{model}' has no ready and verified endpoint right now",
  },
  GW_QUEUE_TIMEOUT: {
    status: 503,
    message: "Request waited {waitMs} ms in the queue of deployment '{deployment}' without a free slot",
  },
  GW_WAKING: {
    status: 503,
    message:
      "Deployment '{deployment}' is waking from zero and had no endpoint within {holdSeconds} s; retry after {retryAfterSeconds} s",
  },
  GW_DRAINING: { status: 503, message: '{subject} is draining; retry after {retryAfterSeconds} s' },
  GW_UPSTREAM_ERROR: { status: 502, message: 'The model endpoint failed: {reason}' },
  GW_UPSTREAM_TIMEOUT: { status: 504, message: 'The model endpoint did not answer within {timeoutMs} ms' },
  GW_CLIENT_CLOSED: { status: 499, message: 'The client closed the connection before the response ended' },
  GW_INTERNAL: { status: 500, message: 'Internal gateway error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type GatewayErrorCode = keyof typeof GatewayErrors;

export type ErrorParams = Readonly<Record<string, string | number>>;

export function formatMessage(template: string, params: ErrorParams): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => {
    const v = params[name];
    return v === undefined ? whole : String(v);
  });
}

export class GatewayError extends Error {
  readonly code: GatewayErrorCode;
  readonly statusCode: number;
  readonly retryAfterSeconds: number | undefined;
  /** What the message was built from: the error travels as data (picker/verdict.ts) and back. */
  readonly params: ErrorParams;

  constructor(
    code: GatewayErrorCode,
    params: ErrorParams = {},
    opts: { retryAfterSeconds?: number; cause?: unknown } = {},
  ) {
    super(formatMessage(GatewayErrors[code].message, params), { cause: opts.cause });
    this.name = 'GatewayError';
    this.code = code;
    this.statusCode = GatewayErrors[code].status;
    this.retryAfterSeconds = opts.retryAfterSeconds;
    this.params = params;
  }
}

export interface ErrorBody {
  readonly error: { readonly message: string; readonly type: string; readonly code: GatewayErrorCode };
}

function typeOf(status: number): string {
  if (status === 429) return 'rate_limit_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status >= 500) return 'server_error';
  if (status === 404) return 'not_found_error';
  return 'invalid_request_error';
}

export function buildErrorBody(err: GatewayError): ErrorBody {
  return { error: { message: err.message, type: typeOf(err.statusCode), code: err.code } };
}
