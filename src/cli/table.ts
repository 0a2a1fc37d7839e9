/**
 * Renders rows as columns separated by two spaces; columns flagged in `rightAlign` (numbers) are
 * right-aligned, the others left-aligned. Returns one string per line.
 */
export function renderTable(headers: string[], rows: string[][], rightAlign: boolean[], indent = '  '): string[] {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map(r => (r[i] ?? '').length)));
  const line = (cells: string[]) => indent + cells
    .map((c, i) => (rightAlign[i] ? c.padStart(widths[i]) : c.padEnd(widths[i])))
    .join('  ')
    .trimEnd();
  return [line(headers), ...rows.map(line)];
}
