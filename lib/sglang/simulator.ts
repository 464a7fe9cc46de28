// How an answer says it came from cacheroute's SGLang simulator (test/sim), not
// an engine: every answer of the simulator carries this header, SGLang's none.
// A qualification reads it for its evidence level (ADR 0033).
export const SIMULATOR_HEADER = 'x-sim-worker';
