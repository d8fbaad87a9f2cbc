// Images the tests name. UNPULLABLE is in a closed loopback registry, named by digest: apply takes
// a digest as its own pin without asking (docs/images.md), so only a node finds out that it cannot
// be pulled — "connection refused", registry_unreachable.
export const UNPULLABLE = `127.0.0.1:5999/nothing:1@sha256:${'0'.repeat(64)}`;
