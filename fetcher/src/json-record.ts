// A small JSON record beside model files (the fetch marker, a verification record): read through
// its schema, where anything missing, unreadable as JSON or of another shape is no record; and
// written whole, then renamed, so a crash never leaves half a record that a reader could trust.
import { randomBytes } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { z } from 'zod';

export async function readJsonRecord<S extends z.ZodType>(
  file: string,
  schema: S,
): Promise<z.infer<S> | undefined> {
  const text = await readFile(file, 'utf8').catch((e: unknown) => {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  });
  if (text === undefined) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export async function writeJsonRecord(file: string, text: string): Promise<void> {
  const tmp = join(dirname(file), `.${basename(file)}.${randomBytes(4).toString('hex')}.tmp`);
  await writeFile(tmp, text);
  await rename(tmp, file);
}
