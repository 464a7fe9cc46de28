// Regexes written by a namespace user (a Task's output checks) run in the
// operator, one process for the whole cluster. JavaScript's RegExp backtracks:
// `(a+)+$` against thirty `a`s and a `!` takes seconds, a few more characters
// take hours, and the operator stalls. RE2 matches in time linear in the input
// and refuses what needs backtracking (backreferences, lookaround), so a
// pattern that compiles here cannot stall the matcher. re2js is RE2J ported to
// plain JavaScript (no native build).

import { RE2JS } from 're2js';

export type Re2Compiled = { ok: true; value: RE2JS } | { ok: false; error: string };

/** The pattern compiled under RE2 semantics, or why RE2 refuses it, in words for the author. */
export function compileRe2Pattern(pattern: string): Re2Compiled {
  try {
    return { ok: true, value: RE2JS.compile(pattern) };
  } catch (e) {
    const reason = e instanceof Error ? e.message : String(e);
    return {
      ok: false,
      error:
        `RE2 cannot compile the pattern (${reason}); patterns run under RE2 syntax, which has no ` +
        'backreferences or lookaround: rewrite it without them',
    };
  }
}
