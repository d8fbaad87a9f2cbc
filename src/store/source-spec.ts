// What a source of a cache is (its prefix, kind and how its values are held) and what a value of
// it that cannot be read looks like: shared by the reflector that reads sources and the reads kept
// between CLI commands (src/store/kept-reads.ts), which the reflector uses.

export interface SourceSpec {
  prefix: string;
  /** The kind every value under the prefix must have (others are unreadable). */
  kind?: string;
  /** Keep keys and revisions only: values are neither decoded nor held (value is undefined). */
  keysOnly?: boolean;
  /**
   * Paths of subtrees that many values share (a service's template in every desired key): held
   * once, frozen (src/store/interner.ts).
   */
  share?: readonly (readonly string[])[];
  /** Skip schema validation (JSON decoding still applies). */
  validate?: boolean;
  /**
   * Hold only this many keys, those that sort last (a log under sortable ids, such as audit/:
   * the newest records). Older keys are dropped without a change; the consistency check skips
   * such a source, whose count differs from the store's by design.
   */
  newest?: number;
}

/** A stored value this version cannot read. */
export interface Unreadable {
  key: string;
  modRevision: number;
  reason: string;
  /** The decoded JSON, when the value was JSON at all (for names in reports). */
  raw?: unknown;
}
