// Why an endpoint in a Deployment's status is or is not routable: the reason the verification
// pass writes, and what the readiness gate reads back (readiness-gate/verified.ts).
export const EndpointReason = {
  NotReady: 'NotReady',
  OutdatedRevision: 'OutdatedRevision',
  IdentityMismatch: 'IdentityMismatch',
  VerificationFailed: 'VerificationFailed',
  Verified: 'Verified',
  NotOwned: 'NotOwned',
} as const;
