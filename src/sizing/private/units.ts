/**
 * Unit constants and formatting shared by the sizing messages and the CLI (internal).
 *
 * Two byte units appear on purpose: accelerator memory is published in GiB (2^30 bytes: EC2 and
 * nvidia-smi report it so), model sizes in GB (1e9 bytes: how checkpoints and papers state them).
 * Every message names the unit it prints.
 */

/** Bytes in one GiB (2^30). */
export const GIB = 1024 ** 3;
/** Bytes in one GB (1e9). */
export const GB = 1e9;

/** '141.2 GB' */
export function formatGb(bytes: number): string {
  return `${(bytes / GB).toFixed(1)} GB`;
}

/** '131.5 GiB' */
export function formatGib(bytes: number): string {
  return `${(bytes / GIB).toFixed(1)} GiB`;
}

/** '141.2 GB (131.5 GiB)' */
export function formatGbAndGib(bytes: number): string {
  return `${formatGb(bytes)} (${formatGib(bytes)})`;
}

/** '72.0 GiB (77.3 GB)' */
export function formatGibAndGb(bytes: number): string {
  return `${formatGib(bytes)} (${formatGb(bytes)})`;
}

/** '131,072' */
export function formatInt(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** A duration in the unit a reader expects: '850 us', '6.85 ms', '1.23 s'. */
export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) {
    return String(seconds);
  }
  if (seconds < 1e-3) {
    return `${(seconds * 1e6).toFixed(0)} us`;
  }
  if (seconds < 1) {
    const ms = seconds * 1e3;
    return `${ms < 100 ? ms.toFixed(2) : ms.toFixed(0)} ms`;
  }
  return `${seconds.toFixed(2)} s`;
}

/** 'a', 'a or b', 'a, b or c' */
export function joinOr(items: string[]): string {
  if (items.length <= 1) {
    return items.join('');
  }
  return `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

/**
 * The indefinite article for a hardware name as it is read aloud: 'an H200' (aitch), 'a B200'.
 */
export function withArticle(name: string): string {
  // Acronyms are read letter by letter: letters whose spoken name starts with a vowel sound take 'an'.
  const acronym = /^[A-Z][A-Z0-9-]/.test(name);
  const vowelSound = acronym ? /^[AEFHILMNORSX]/ : /^[aeiou]/i;
  return `${vowelSound.test(name) ? 'an' : 'a'} ${name}`;
}

/** Rounds `value` up to a multiple of `multiple`. */
export function roundUp(value: number, multiple: number): number {
  return Math.ceil(value / multiple) * multiple;
}

/** Throws unless `value` is a finite number > 0 (and an integer when `integer`). */
export function requirePositive(field: string, value: number, integer: boolean, fix: string): void {
  const ok = Number.isFinite(value) && value > 0 && (!integer || Number.isInteger(value));
  if (!ok) {
    throw new Error(`'${field}' (${value}) must be a positive ${integer ? 'integer' : 'number'}; ${fix}`);
  }
}

/** Throws unless 0 < value <= 1. */
export function requireFraction(field: string, value: number, fix: string): void {
  if (!(Number.isFinite(value) && value > 0 && value <= 1)) {
    throw new Error(`'${field}' (${value}) must be greater than 0 and at most 1; ${fix}`);
  }
}
