// Why an image could not be had: the closed vocabulary of resolving a tag at apply
// (src/images/registry.ts) and of a node's failed pull (classifyPullError). The same strings go to
// ReplicaObserved.status.code, audit records and metric labels (docs/images.md lists them).

export const IMAGE_ERROR_CODES = {
  image_not_found: 'the registry answered, and has no such repository, tag or digest',
  image_unauthorized: 'the registry wants credentials and none were given, or refused the ones given (jaco registry login)',
  registry_unreachable: 'the registry could not be asked: connection refused, no such host, a timeout, a TLS failure (untrusted certificate, or plain HTTP where HTTPS was expected) or a server error',
} as const;
export type ImageErrorCode = keyof typeof IMAGE_ERROR_CODES;

export function isImageErrorCode(s: string): s is ImageErrorCode {
  return Object.hasOwn(IMAGE_ERROR_CODES, s);
}
