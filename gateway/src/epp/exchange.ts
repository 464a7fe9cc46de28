// One ext_proc stream: one HTTP request Envoy holds while the picker decides.
// Request headers (the path, the tenant's key) → body chunks, buffered to the
// end (FULL_DUPLEX_STREAMED) → the pick, from the same Picker the proxy asks →
// the answer: the endpoint in a header and `envoy.lb` metadata, then the body
// as sent upstream (salt stamped, a pair's bootstrap fields); or an
// ImmediateResponse (refusal, error, stored answer). Response headers tell the
// endpoint book the first byte; the stream's end settles the lease (in
// flight, admission's slot and latency, the policy's outcome): with the
// reference bootstrap's response_trailer_mode SEND that is the response's own
// end (ADR 0043). The response body does not pass through by default: a
// streamed answer's progress is estimated (answer-progress.ts), and the KV and
// load events tell the picker the rest.

import type { Clock } from '#kube/clock.ts';
import type { EndpointBook, LoadGuard } from '../endpoints/book.ts';
import { buildErrorBody, GatewayError } from '../errors/index.ts';
import { ENDPOINT_HEADER } from '../forward/served.ts';
import type { KvIndexFleet } from '../kv-index/fleet.ts';
import type { Picker } from '../picker/pick.ts';
import type { DecisionLog, Decision, PickLease, PickResult } from '../picker/types.ts';
import { kindOfPath } from '../request/routes.ts';
import type { RouteKind } from '../request/shape.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { authenticate } from '../tenancy/authenticate.ts';
import { applyLimitHeaders, toRateLimitError } from '../tenancy/limit-response.ts';
import type { RefusalMemoLimiter } from '../tenancy/refusal-memo.ts';
import type { Tenant, TenantDirectory } from '../tenancy/tenant.ts';
import {
  buildBodyChunks,
  buildContinue,
  buildImmediate,
  buildPickHeaders,
  buildResponseChunk,
  DESTINATION_NAMESPACE,
  headerOption,
  SERVED_KEY,
  SUBSET_KEY,
  SUBSET_NAMESPACE,
  type ProcessingResponse,
} from './answers.ts';
import {
  buildEchoRequest,
  readServedResult,
  readTestSelection,
  SERVED_RESULT_HEADER,
} from './conformance-hooks.ts';
import { AnswerProgress } from './answer-progress.ts';
import type { DecodeEstimate } from './decode-estimate.ts';
import { readMetadataList, toHeaderRecord, type HttpHeaders, type ProcessingRequest } from './messages.ts';

/** What the endpoint picker shares with the proxy: built once by server.ts, read by every stream. */
export interface PickerHost {
  readonly picker: Picker;
  readonly book: EndpointBook;
  readonly kvIndex: KvIndexFleet;
  readonly clock: Clock;
  readonly tenants: TenantDirectory;
  /** Refuses a tenant inside a rate-limit refusal before its body is read (the proxy's memo). */
  readonly memo?: RefusalMemoLimiter;
  /** Decisions at info (as the proxy's); a stream that failed at warn. */
  readonly log: DecisionLog & { warn(obj: object, msg: string): void };
  readonly bodyLimitBytes: number;
  /** Endpoints named after the first in `envoy.lb`, for the data plane's retries. */
  readonly fallbacks: number;
  readonly draining: () => boolean;
  /**
   * A prefill/decode pair behind one proxy: Envoy carries the request to the decode (the
   * client's answer); this sends the prefill its copy (same body, same bootstrap room).
   */
  readonly sendPrefill: (prefill: RouteEndpoint, path: string, body: Decision['body']) => void;
  /** The runtime's own API key as an Authorization header, or undefined (gateway.authorizationFor). */
  readonly authorizationFor: (endpoint: RouteEndpoint) => string | undefined;
  /** GIE's conformance test hooks (conformance-hooks.ts; --picker-conformance-hooks): tests only. */
  readonly conformanceHooks?: boolean;
  /** Streamed answers' progress where their body passes by (absent: none, the decode load stays whole). */
  readonly decodeEstimate?: DecodeEstimate;
}

/** Addresses already worked out: an endpoint is named in every pick that can choose it. */
const ADDRESSES = new WeakMap<RouteEndpoint, string>();

/** `ip:port` of an endpoint, as GIE names endpoints (the URL's host; port 80 when it has none). */
export function addressOf(endpoint: RouteEndpoint): string {
  let address = ADDRESSES.get(endpoint);
  if (address === undefined) {
    const url = new URL(endpoint.url);
    address = url.port ? url.host : `${url.host}:${url.protocol === 'https:' ? 443 : 80}`;
    ADDRESSES.set(endpoint, address);
  }
  return address;
}

interface Routed {
  readonly lease: PickLease;
  readonly decision: Decision;
  readonly endpoint: RouteEndpoint;
  readonly guard: LoadGuard;
  readonly pickedAt: number;
  /** Headers for the client's answer (a tenant's x-ratelimit-* figures). */
  readonly clientHeaders: Readonly<Record<string, string>>;
  status?: number;
  latencyMs?: number;
  /** From the first byte of a 2xx answer: its progress (decode load) and, counted, its cache report. */
  progress?: AnswerProgress;
}

export class PickerExchange {
  readonly #host: PickerHost;
  readonly #send: (r: ProcessingResponse) => void;
  readonly #id: string;
  /** The stream is over (cancelled, broken or ended): a pick not yet made starts aborted. */
  #over = false;
  /**
   * The pick's signal while it may wait (admission, wake, an identical request): the only one
   * listening for the stream's end. Aborting costs a DOMException with its stack, so a stream
   * that ends after its pick (nearly all) aborts nothing.
   */
  #waiting: AbortController | undefined;
  #headers: Record<string, string> = {};
  #kind: RouteKind | undefined;
  #path = '';
  #tenant: Tenant | undefined;
  readonly #chunks: Buffer[] = [];
  #bodyBytes = 0;
  /** Answered (immediately, or the pick sent): later request messages are not ours to answer. */
  #answered = false;
  #routed: Routed | undefined;
  #ended = false;

  constructor(host: PickerHost, id: string, send: (r: ProcessingResponse) => void) {
    this.#host = host;
    this.#id = id;
    this.#send = send;
  }

  /**
   * One message, handled at once; a promise only while it waits (the body's end: the pick).
   * Most messages need none, and a stream's promises were a good part of a request's garbage.
   */
  receive(msg: ProcessingRequest): Promise<void> | undefined {
    try {
      return this.#dispatch(msg)?.catch((err: unknown) => this.#answerGatewayError(err));
    } catch (err) {
      this.#answerGatewayError(err);
      return undefined;
    }
  }

  #dispatch(msg: ProcessingRequest): Promise<void> | undefined {
    if (msg.request_headers) this.#onRequestHeaders(msg.request_headers);
    else if (msg.request_body) {
      if (this.#answered) return undefined;
      this.#onBodyChunk(msg.request_body.body);
      if (msg.request_body.end_of_stream) return this.#pick(msg, false);
    } else if (msg.request_trailers) {
      const trailersContinue = (): void => this.#send(buildContinue('request_trailers'));
      if (!this.#answered) return this.#pick(msg, true).then(trailersContinue);
      trailersContinue();
    } else if (msg.response_headers) this.#onResponseHeaders(msg);
    else if (msg.response_body) {
      // Only where the data plane sends the response body too (not by default): passed on as
      // is, its events counted.
      const { body, end_of_stream } = msg.response_body;
      this.#routed?.progress?.body(body);
      this.#send(buildResponseChunk(body, end_of_stream));
    } else if (msg.response_trailers) this.#send(buildContinue('response_trailers'));
    return undefined;
  }

  /** A refusal or error the gateway names becomes Envoy's answer; anything else breaks the stream. */
  #answerGatewayError(err: unknown): void {
    if (!(err instanceof GatewayError)) throw err;
    this.#answerError(err);
  }

  /** The stream is over or broke: waits (admission, wake, an identical request) end now. */
  cancel(): void {
    this.#over = true;
    this.#waiting?.abort();
  }

  /** After the last message was handled: the request is done either way, its lease settled. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.cancel();
    const r = this.#routed;
    // The request's state goes with it: grpc-js keeps a finished call (and its listeners, this
    // exchange among them) for a while, and all it reaches outlived the young generation (the
    // tokens, the parsed body: copied by two scavenges, then promoted for a mark-compact).
    this.#routed = undefined;
    this.#headers = {};
    this.#tenant = undefined;
    if (!r) return;
    r.guard.release();
    const { policy } = r.lease;
    const input = r.decision.input;
    const ok = r.status !== undefined && r.status < 500;
    const { report, streamedMs } = r.progress?.end(ok) ?? {};
    // Its finishing KV store, if it made one, may come a little after its last byte.
    if (ok) this.#host.kvIndex.outputEnded(input.id, streamedMs);
    else this.#host.kvIndex.outputDropped(input.id);
    this.#host.book.observe(
      policy,
      ok
        ? { kind: 'completed', endpoint: r.endpoint.id, input, ...(report ? { report } : {}) }
        : { kind: 'failed', endpoint: r.endpoint.id, input },
    );
    // No answer seen (the client went away first): admission learns nothing from it.
    r.lease.release(
      r.status === undefined
        ? undefined
        : { ok, ...(r.latencyMs !== undefined ? { latencyMs: r.latencyMs } : {}) },
    );
  }

  #onRequestHeaders(h: HttpHeaders): void {
    const host = this.#host;
    this.#headers = toHeaderRecord(h);
    const method = this.#headers[':method'] ?? '';
    const path = this.#headers[':path'] ?? '';
    this.#kind = method === 'POST' ? kindOfPath(path) : undefined;
    if (!this.#kind) throw new GatewayError('GW_NOT_FOUND', { method, url: path });
    this.#path = path.split('?')[0] ?? path;
    if (host.draining())
      throw new GatewayError(
        'GW_DRAINING',
        { subject: 'This endpoint picker', retryAfterSeconds: 1 },
        { retryAfterSeconds: 1 },
      );
    if (host.tenants.mode === 'keys') {
      const tenant = authenticate(host.tenants, this.#headers);
      this.#tenant = tenant;
      const refused = host.memo?.refusalOf(tenant);
      if (refused) {
        const headers: Record<string, string> = {};
        applyLimitHeaders(refused, (name, value) => (headers[name] = value));
        throw withHeaders(toRateLimitError(tenant, refused), headers);
      }
    }
    if (h.end_of_stream)
      throw new GatewayError('GW_BAD_REQUEST', { detail: 'a generation request needs a JSON body' });
  }

  #onBodyChunk(chunk: Buffer): void {
    this.#bodyBytes += chunk.length;
    if (this.#bodyBytes > this.#host.bodyLimitBytes)
      throw new GatewayError('GW_PAYLOAD_TOO_LARGE', { limitBytes: this.#host.bodyLimitBytes });
    this.#chunks.push(chunk);
  }

  async #pick(msg: ProcessingRequest, trailersFollow: boolean): Promise<void> {
    const host = this.#host;
    const kind = this.#kind;
    if (!kind) return;
    this.#answered = true;
    let body: unknown;
    try {
      const chunks = this.#chunks;
      // Envoy sends a small body in one chunk: read in place, not copied first.
      const raw = chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks);
      chunks.length = 0;
      body = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw new GatewayError('GW_BAD_REQUEST', {
        detail: `body: not JSON (${err instanceof Error ? err.message : String(err)})`,
      });
    }
    const within = candidatesWithin(msg, this.#headers, host.conformanceHooks === true);
    const waiting = new AbortController();
    if (this.#over) waiting.abort();
    this.#waiting = waiting;
    let picked: PickResult;
    try {
      picked = await host.picker.pick(
        {
          id: this.#id,
          kind,
          path: this.#path,
          body,
          headers: this.#headers,
          tenant: this.#tenant,
          fallbacks: host.fallbacks,
          ...(within ? { within: (e: RouteEndpoint) => within(addressOf(e)) } : {}),
        },
        { signal: waiting.signal, log: host.log },
      );
    } finally {
      this.#waiting = undefined;
    }
    if (picked.kind === 'refused') {
      const v = picked.verdict;
      const headers = {
        ...picked.headers,
        'content-type': 'application/json',
        ...(v.retryAfterSeconds !== undefined ? { 'retry-after': String(v.retryAfterSeconds) } : {}),
      };
      this.#send(buildImmediate(v.status, headers, JSON.stringify(v.body), `cacheroute_${v.code}`));
      return;
    }
    if (picked.kind === 'reused') {
      const a = picked.answer;
      const headers = { ...picked.headers, ...a.headers, 'content-type': a.contentType };
      this.#send(buildImmediate(a.status, headers, a.body, `cacheroute_reused_${a.source}`));
      return;
    }
    const { decision, lease } = picked;
    // The answer goes from the runtime through Envoy to the client, never here: nothing to store.
    void lease.reuse?.fail();
    if (this.#over) {
      lease.release(undefined);
      return;
    }
    const { target } = decision;
    const endpoint = target.kind === 'pair' ? target.decode : target.endpoint;
    const order = target.kind === 'pair' ? [endpoint] : [endpoint, ...target.fallbacks];
    host.kvIndex.expectEvents(target.kind === 'pair' ? target.prefill.id : endpoint.id);
    const guard = host.book.track(endpoint.id);
    host.book.observe(lease.policy, { kind: 'routed', endpoint: endpoint.id, input: decision.input });
    this.#routed = {
      lease,
      decision,
      endpoint,
      guard,
      pickedAt: host.clock.now(),
      clientHeaders: { ...picked.headers, [ENDPOINT_HEADER]: endpoint.id },
    };
    if (target.kind === 'pair') host.sendPrefill(target.prefill, this.#path, decision.body);
    // The client's Authorization is its tenant's key, for this picker only: never the runtime's to
    // see. The runtime gets its own key, as the proxy sends it (none known: no header).
    const runtimeAuth = host.authorizationFor(endpoint);
    const upstreamHeaders = {
      ...(runtimeAuth ? { authorization: runtimeAuth } : {}),
      ...(host.conformanceHooks ? buildEchoRequest(addressOf(endpoint)) : {}),
    };
    this.#send(buildPickHeaders(order.map(addressOf), upstreamHeaders, ['authorization']));
    for (const chunk of buildBodyChunks(Buffer.from(JSON.stringify(decision.body)), !trailersFollow))
      this.#send(chunk);
  }

  #onResponseHeaders(msg: ProcessingRequest): void {
    const r = this.#routed;
    if (!r) {
      this.#send(buildContinue('response_headers'));
      return;
    }
    const answer = toHeaderRecord(msg.response_headers ?? { headers: { headers: [] }, end_of_stream: false });
    const status = Number(answer[':status']);
    r.status = Number.isFinite(status) ? status : 502;
    r.latencyMs = this.#host.clock.now() - r.pickedAt;
    // A data plane that reports the endpoint it served from (GIE): the outcome is that one's.
    const served = readMetadataList(msg, DESTINATION_NAMESPACE, SERVED_KEY)?.[0];
    if (served && served !== addressOf(r.endpoint))
      this.#host.log.info({ served, picked: r.endpoint.id }, 'served by a fallback');
    this.#host.book.observe(r.lease.policy, {
      kind: 'first-token',
      endpoint: r.endpoint.id,
      input: r.decision.input,
    });
    if (r.status < 300) r.progress = this.#followAnswer(r, answer);
    const clientHeaders = this.#host.conformanceHooks
      ? { ...r.clientHeaders, [SERVED_RESULT_HEADER]: readServedResult(msg) }
      : r.clientHeaders;
    this.#send({
      response_headers: {
        response: {
          header_mutation: {
            set_headers: Object.entries(clientHeaders).map(([key, value]) => headerOption(key, value)),
          },
        },
      },
    });
  }

  /** A 2xx answer's progress: counted if its body comes by, else estimated when it streams. */
  #followAnswer(r: Routed, answer: Readonly<Record<string, string>>): AnswerProgress {
    const { book } = this.#host;
    const { policy } = r.lease;
    const endpoint = r.endpoint.id;
    const input = r.decision.input;
    const progress = new AnswerProgress((tokens) =>
      book.observe(policy, { kind: 'decoding', endpoint, input, tokens }),
    );
    const estimate = this.#host.decodeEstimate;
    const predicted = policy.expectedOutput?.(input);
    const streamed = (answer['content-type'] ?? '').includes('event-stream');
    if (estimate && predicted !== undefined && streamed) {
      const who = { id: input.id, ...(input.maxTokens !== undefined ? { cap: input.maxTokens } : {}) };
      progress.estimate(estimate, endpoint, predicted, who);
    }
    return progress;
  }

  #answerError(err: GatewayError): void {
    this.#answered = true;
    const headers: Record<string, string> = { ...extraHeaders(err), 'content-type': 'application/json' };
    if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.retryAfterSeconds);
    this.#send(
      buildImmediate(err.statusCode, headers, JSON.stringify(buildErrorBody(err)), `cacheroute_${err.code}`),
    );
  }
}

/**
 * The addresses a pick may name: the data plane's subset hint, or (conformance test hooks on)
 * the test's own selection, which wins over the hint as in GIE's reference picker; undefined: any.
 */
function candidatesWithin(
  msg: ProcessingRequest,
  headers: Readonly<Record<string, string>>,
  hooks: boolean,
): ((address: string) => boolean) | undefined {
  const selection = hooks ? readTestSelection(headers) : undefined;
  if (selection) return selection;
  const subset = readMetadataList(msg, SUBSET_NAMESPACE, SUBSET_KEY);
  const hinted = subset && new Set(subset);
  return hinted && ((address) => hinted.has(address));
}

const EXTRA_HEADERS = new WeakMap<GatewayError, Record<string, string>>();

function withHeaders(err: GatewayError, headers: Record<string, string>): GatewayError {
  EXTRA_HEADERS.set(err, headers);
  return err;
}

function extraHeaders(err: GatewayError): Record<string, string> {
  return EXTRA_HEADERS.get(err) ?? {};
}
