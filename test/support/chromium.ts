// A real headless Chromium (Debian's /usr/bin/chromium) driven over the
// DevTools protocol with Node's built-in WebSocket: no browser download, no
// playwright. A fresh profile dir per start; stop() closes the browser, waits
// for every process of that profile to exit and removes the dir; processes.ts
// covers the other exit paths. `bash hack/install-test-deps.sh` installs it.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isPidAlive, readLogTail, registerCleanup, spawnManaged, stopManaged } from './processes.ts';

export const CHROMIUM_BIN = process.env['CACHEROUTE_CHROMIUM'] ?? '/usr/bin/chromium';

export interface Chromium {
  readonly dir: string;
  /** A new tab, driven over its own DevTools connection. */
  newPage(): Promise<Page>;
  stop(): Promise<void>;
}

export interface Page {
  /** Navigates and resolves on the load event. */
  goto(url: string): Promise<void>;
  /** Evaluates an expression in the page; awaits a returned promise; returns its JSON value. */
  evaluate<T>(expression: string): Promise<T>;
  /** PNG of the viewport (or the full page) written to `path`. */
  screenshot(path: string, opts?: { fullPage?: boolean }): Promise<void>;
  /** Console errors and uncaught exceptions seen so far (CSP violations included). */
  readonly errors: string[];
  close(): Promise<void>;
}

export async function startChromium(opts: { startTimeoutMs?: number } = {}): Promise<Chromium> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-chromium-'));
  const profile = join(dir, 'profile');
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  const unregister = registerCleanup(() => {
    killProfileProcesses(profile);
    removeDir();
  });
  const logPath = join(dir, 'chromium.log');
  const proc = spawnManaged(
    'chromium',
    CHROMIUM_BIN,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
      '--remote-debugging-address=127.0.0.1',
      '--remote-debugging-port=0',
      `--user-data-dir=${profile}`,
      '--window-size=1400,900',
      'about:blank',
    ],
    { logPath, cwd: dir },
  );
  let stopped: Promise<void> | undefined;
  let browser: Cdp | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await browser?.send('Browser.close').catch(() => undefined);
      browser?.close();
      await stopManaged(proc, 5_000);
      // Renderers and the zygote outlive the browser process by a moment.
      await waitForProfileProcesses(profile, 5_000);
      unregister();
      removeDir();
    })());

  try {
    const port = await waitForDevToolsPort(profile, proc, logPath, opts.startTimeoutMs ?? 30_000);
    const version = (await (await fetch(`http://127.0.0.1:${port}/json/version`)).json()) as {
      webSocketDebuggerUrl: string;
    };
    browser = await Cdp.connect(version.webSocketDebuggerUrl);
    const cdp = browser;
    return {
      dir,
      stop,
      newPage: async () => {
        const { targetId } = await cdp.send<{ targetId: string }>('Target.createTarget', {
          url: 'about:blank',
        });
        return openPage(port, targetId, cdp);
      },
    };
  } catch (err) {
    await stop();
    throw new Error(`chromium did not start: ${String(err)}\n${readLogTail(logPath)}`, { cause: err });
  }
}

async function openPage(port: number, targetId: string, browser: Cdp): Promise<Page> {
  const cdp = await Cdp.connect(`ws://127.0.0.1:${port}/devtools/page/${targetId}`);
  const errors: string[] = [];
  cdp.on('Runtime.exceptionThrown', (p) => errors.push(JSON.stringify(p)));
  cdp.on('Log.entryAdded', (p) => {
    const entry = (p as { entry?: { level?: string; text?: string } }).entry;
    if (entry?.level === 'error') errors.push(entry.text ?? '');
  });
  cdp.on('Runtime.consoleAPICalled', (p) => {
    if ((p as { type?: string }).type === 'error') errors.push(JSON.stringify(p));
  });
  await Promise.all([cdp.send('Page.enable'), cdp.send('Runtime.enable'), cdp.send('Log.enable')]);
  return {
    errors,
    goto: async (url) => {
      const loaded = cdp.once('Page.loadEventFired');
      const r = await cdp.send<{ errorText?: string }>('Page.navigate', { url });
      if (r.errorText) throw new Error(`navigate ${url}: ${r.errorText}`);
      await loaded;
    },
    evaluate: async <T>(expression: string): Promise<T> => {
      const r = await cdp.send<{ result: { value?: unknown }; exceptionDetails?: unknown }>(
        'Runtime.evaluate',
        {
          expression,
          awaitPromise: true,
          returnByValue: true,
        },
      );
      if (r.exceptionDetails) throw new Error(`evaluate: ${JSON.stringify(r.exceptionDetails)}`);
      return r.result.value as T;
    },
    screenshot: async (path, o = {}) => {
      const r = await cdp.send<{ data: string }>('Page.captureScreenshot', {
        format: 'png',
        captureBeyondViewport: o.fullPage ?? false,
      });
      writeFileSync(path, Buffer.from(r.data, 'base64'));
    },
    close: async () => {
      cdp.close();
      await browser.send('Target.closeTarget', { targetId }).catch(() => undefined);
    },
  };
}

/** Chromium writes the port it picked into <profile>/DevToolsActivePort. */
async function waitForDevToolsPort(
  profile: string,
  proc: { isRunning(): boolean },
  logPath: string,
  timeoutMs: number,
): Promise<number> {
  const file = join(profile, 'DevToolsActivePort');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (existsSync(file)) {
      const port = Number(readFileSync(file, 'utf8').split('\n')[0]);
      if (port > 0) return port;
    }
    if (!proc.isRunning()) throw new Error(`chromium exited\n${readLogTail(logPath)}`);
    if (Date.now() > deadline) throw new Error('no DevToolsActivePort');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** PIDs of processes started with this profile (the browser's helpers included). */
function profilePids(profile: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (cmd.includes(`--user-data-dir=${profile}`)) pids.push(Number(name));
    } catch {
      // gone
    }
  }
  return pids;
}

async function waitForProfileProcesses(profile: string, graceMs: number): Promise<void> {
  const deadline = Date.now() + graceMs;
  while (profilePids(profile).some(isPidAlive)) {
    if (Date.now() > deadline) {
      killProfileProcesses(profile);
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

function killProfileProcesses(profile: string): void {
  for (const pid of profilePids(profile)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

type Listener = (params: unknown) => void;

/** A minimal DevTools protocol client: request/response by id, events by method. */
class Cdp {
  readonly #ws: WebSocket;
  #seq = 0;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly #listeners = new Map<string, Set<Listener>>();

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.addEventListener('message', (ev: MessageEvent) => this.#onMessage(String(ev.data)));
    ws.addEventListener('close', () => {
      for (const p of this.#pending.values()) p.reject(new Error('DevTools connection closed'));
      this.#pending.clear();
    });
  }

  static connect(url: string): Promise<Cdp> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.addEventListener('open', () => resolve(new Cdp(ws)), { once: true });
      ws.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)), { once: true });
    });
  }

  send<T = unknown>(method: string, params: object = {}): Promise<T> {
    const id = ++this.#seq;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }

  on(method: string, fn: Listener): void {
    let set = this.#listeners.get(method);
    if (!set) this.#listeners.set(method, (set = new Set()));
    set.add(fn);
  }

  once(method: string): Promise<unknown> {
    return new Promise((resolve) => {
      const fn: Listener = (p) => {
        this.#listeners.get(method)?.delete(fn);
        resolve(p);
      };
      this.on(method, fn);
    });
  }

  close(): void {
    this.#ws.close();
  }

  #onMessage(text: string): void {
    const msg = JSON.parse(text) as {
      id?: number;
      result?: unknown;
      error?: { message: string };
      method?: string;
      params?: unknown;
    };
    if (msg.id !== undefined) {
      const p = this.#pending.get(msg.id);
      this.#pending.delete(msg.id);
      if (msg.error) p?.reject(new Error(msg.error.message));
      else p?.resolve(msg.result);
      return;
    }
    if (msg.method) for (const fn of this.#listeners.get(msg.method) ?? []) fn(msg.params);
  }
}
