/**
 * Why a configuration cannot run: the field at fault, the value it had, and a message that says how to fix it.
 */
export interface SizingProblem {
  /** The property at fault, e.g. 'tensorParallel'. */
  readonly field: string;
  /** The value it had, as text, e.g. '3'. */
  readonly value: string;
  /** What is wrong and how to fix it; starts with `'field' (value)`. */
  readonly message: string;
}
