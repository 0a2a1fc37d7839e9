import { CliIo } from './command';

/**
 * Progress of a long command on stderr: a bar redrawn in place when stderr is a terminal
 * (`io.progress`), otherwise one line per tenth of the work, so logs stay short.
 */
export class ProgressReporter {
  private lastTenth = -1;
  private drawn = false;
  private readonly started = Date.now();

  constructor(private readonly io: CliIo, private readonly label: string) {}

  /** Reports `done` of `total` steps; `detail` is appended (e.g. "412 simulations"). */
  public update(done: number, total: number, detail = ''): void {
    const share = total > 0 ? Math.min(1, done / total) : 1;
    const tail = `${done}/${total}${detail ? `  ${detail}` : ''}  ${this.elapsed()}`;
    if (this.io.progress) {
      const width = 30;
      const filled = Math.round(share * width);
      this.io.progress(`\r${this.label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${tail}\u001b[K`);
      this.drawn = true;
      return;
    }
    const tenth = Math.floor(share * 10);
    if (tenth > this.lastTenth) {
      this.lastTenth = tenth;
      this.io.err(`${this.label}: ${Math.round(share * 100)}% ${tail}`);
    }
  }

  /** Ends the bar's line (terminal only). */
  public finish(): void {
    if (this.drawn && this.io.progress) {
      this.io.progress('\n');
    }
    this.drawn = false;
  }

  private elapsed(): string {
    return `${((Date.now() - this.started) / 1000).toFixed(1)} s`;
  }
}
