import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from '../../test/support/samples.ts';

// docs/operations.md describes the alerts in a table and points to the rules file
// for the rest; the table must name exactly the alerts the file has.
it("docs/operations.md's Alerts table lists every alert of the chart's alerts.yaml, and no other", () => {
  const rules = parse(
    readFileSync(join(REPO_ROOT, 'charts', 'cacheroute', 'monitoring', 'alerts.yaml'), 'utf8'),
  ) as { groups: { rules: { alert?: string }[] }[] };
  const alerts = rules.groups.flatMap((g) => g.rules.flatMap((r) => (r.alert ? [r.alert] : [])));
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8');
  const section = /^## Alerts\n([\s\S]*?)^## /m.exec(doc)?.[1] ?? '';
  const listed = [...section.matchAll(/^\| `(\w+)` /gm)].map((m) => m[1]);
  expect(listed).toEqual(alerts);
});
