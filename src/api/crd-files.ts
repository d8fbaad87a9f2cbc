// The text of each crds/*.yaml file, rendered from crdDefinitions(); shared by the generator
// script and the test that keeps crds/ in step with the source.
import { stringify } from 'yaml';
import { crdDefinitions } from './crds.js';

const HEADER = '# Generated from src/api/crds.ts by `npm run gen:crds`. Do not edit by hand.\n';

export function renderCrds(): Map<string, string> {
  return new Map(crdDefinitions().map((crd) => [`${crd.spec.names.plural}.yaml`, HEADER + stringify(crd, { lineWidth: 0 })]));
}
