// The operator as the integration tests run it: confined to the test's namespaces, no
// leader election, no HTTP listeners, logging errors only; stopped when the test ends.
import { onTestFinished } from 'vitest';
import { createLogger } from '#kube/logger.ts';
import { startOperator, type Operator, type OperatorOptions } from '../../../operator/src/operator.ts';

export async function startTestOperator(
  kubeconfig: string,
  namespaces: readonly string[],
  opts: Pick<OperatorOptions, 'gatewayKeysSecret'> = {},
): Promise<Operator> {
  const op = await startOperator({
    ...opts,
    kubeconfig,
    namespaces: [...namespaces],
    logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
    leaderElection: false,
    http: false,
  });
  onTestFinished(() => op.stop());
  return op;
}
