// What a refused manifest says: every problem at once, each with file:line:column, the document,
// the field path and the rule. Apart from the parser (manifest.ts) so that a command printing the
// error does not load YAML.

export interface ManifestProblem {
  file: string;
  line: number;
  column: number;
  /** 1-based document number in the file (0 when the problem is about the file itself). */
  document: number;
  object?: string;
  path?: string;
  message: string;
  rule?: string;
}

export class ManifestError extends Error {
  override name = 'ManifestError';
  constructor(readonly problems: ManifestProblem[]) {
    super(problems.map(formatProblem).join('\n'));
  }
}

export function formatProblem(p: ManifestProblem): string {
  const where = `${p.file}:${p.line}:${p.column}`;
  const doc = p.document ? ` document ${p.document}${p.object ? ` (${p.object})` : ''}:` : '';
  const field = p.path ? ` ${p.path}:` : '';
  return `${where}:${doc}${field} ${p.message}${p.rule ? ` [${p.rule}]` : ''}`;
}
