// How SGLang 0.5.23's HTTP server (uvicorn) treats connections, where a
// client has to agree with it.

/**
 * uvicorn closes a connection idle this long (sglang/srt/entrypoints/http_server.py passes
 * `timeout_keep_alive=envs.SGLANG_TIMEOUT_KEEP_ALIVE.get()`, default 5 in environ.py) and
 * sends no Keep-Alive header saying so. A client that keeps the connection longer races
 * the server's close: a request written as the close arrives is reset unanswered.
 */
export const SGLANG_KEEP_ALIVE_TIMEOUT_MS = 5_000;
