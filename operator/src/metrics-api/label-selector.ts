// Kubernetes label selectors as an HPA's metric selector sends them
// (`labelSelector=` in the query): equality (=, ==, !=), set (in, notin)
// and existence (key, !key). Pure.

export type Requirement =
  | { readonly key: string; readonly op: 'in' | 'notin'; readonly values: readonly string[] }
  | { readonly key: string; readonly op: 'exists' | 'absent' };

export type Selector = readonly Requirement[];

/** Splits on the commas outside parentheses. */
function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      terms.push(text.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(text.slice(start));
  return terms.map((t) => t.trim()).filter((t) => t !== '');
}

const KEY = String.raw`[A-Za-z0-9][-A-Za-z0-9_./]*`;
const VALUE = String.raw`[A-Za-z0-9_.-]*`;
const EQUALITY = new RegExp(`^(${KEY})\\s*(==|=|!=)\\s*(${VALUE})$`);
const SET = new RegExp(`^(${KEY})\\s+(in|notin)\\s*\\(([^)]*)\\)$`);
const EXISTS = new RegExp(`^(!?)(${KEY})$`);

export function parseLabelSelector(
  text: string,
): { ok: true; value: Selector } | { ok: false; error: string } {
  const out: Requirement[] = [];
  for (const term of splitTerms(text)) {
    const eq = EQUALITY.exec(term);
    if (eq) {
      out.push({ key: eq[1] ?? '', op: eq[2] === '!=' ? 'notin' : 'in', values: [eq[3] ?? ''] });
      continue;
    }
    const set = SET.exec(term);
    if (set) {
      const values = (set[3] ?? '').split(',').map((v) => v.trim());
      if (values.some((v) => !new RegExp(`^${VALUE}$`).test(v)))
        return { ok: false, error: `labelSelector: a value in "${term}" is not a label value` };
      out.push({ key: set[1] ?? '', op: set[2] === 'notin' ? 'notin' : 'in', values });
      continue;
    }
    const exists = EXISTS.exec(term);
    if (exists) {
      out.push({ key: exists[2] ?? '', op: exists[1] === '!' ? 'absent' : 'exists' });
      continue;
    }
    return {
      ok: false,
      error: `labelSelector: cannot read "${term}" (use key=value, key!=value, key in (a,b), key notin (a,b), key or !key)`,
    };
  }
  return { ok: true, value: out };
}

export function matchesSelector(selector: Selector, labels: Readonly<Record<string, string>>): boolean {
  return selector.every((r) => {
    const v = Object.hasOwn(labels, r.key) ? labels[r.key] : undefined;
    switch (r.op) {
      case 'exists':
        return v !== undefined;
      case 'absent':
        return v === undefined;
      case 'in':
        return v !== undefined && r.values.includes(v);
      case 'notin':
        return v === undefined || !r.values.includes(v);
    }
  });
}
