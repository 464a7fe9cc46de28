// The images `make images` builds (hack/images/build.sh): built, or reused from the cache
// when their inputs have not changed, for the image tests (test/e2e/images.test.ts).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './samples.ts';

export const IMAGE_NAMES = ['operator', 'gateway', 'simulator'] as const;
export type ImageName = (typeof IMAGE_NAMES)[number];

export interface BuiltImage {
  name: ImageName;
  /** The OCI archive in the cache. */
  archive: string;
  /** The image manifest's digest. */
  digest: string;
}

/** build.sh's stdout: one `<name> <archive> <digest>` line per image. */
export function parseBuildOutput(text: string): BuiltImage[] {
  return text
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((cols) => cols.length === 3)
    .map(([name = '', archive = '', digest = '']) => {
      if (!(IMAGE_NAMES as readonly string[]).includes(name))
        throw new Error(`build.sh: unknown image ${name}`);
      if (!/^sha256:[0-9a-f]{64}$/.test(digest))
        throw new Error(`build.sh: ${name}: not a digest: ${digest}`);
      return { name: name as ImageName, archive, digest };
    });
}

/**
 * Runs hack/images/build.sh for the archives `make images` left in the cache. Inside
 * hack/in-netns.sh nothing can be fetched (npm, Debian), so it only reuses them
 * (IMAGES_CACHED_ONLY=1) and fails naming `make images` when an input changed since.
 */
export async function buildImages(
  opts: { log?: (line: string) => void } = {},
): Promise<Map<ImageName, BuiltImage>> {
  const log = opts.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(
      'bash',
      [join(REPO_ROOT, 'hack', 'images', 'build.sh'), ...IMAGE_NAMES],
      { timeout: 900_000, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, IMAGES_CACHED_ONLY: '1' } },
      (err, out, stderr) => {
        if (err) reject(new Error(`hack/images/build.sh failed: ${err.message}\n${stderr}`, { cause: err }));
        else resolve(out);
      },
    );
    child.stderr?.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString().trimEnd().split('\n')) log(line);
    });
  });
  const built = parseBuildOutput(stdout);
  return new Map(built.map((b) => [b.name, b]));
}
