// Ports `disagg local` binds late (an --autoscale scale-up binds its slot minutes after the run
// chose it) must not come from the range the kernel hands to outbound connections: a CI run failed
// when a client's ephemeral port took a decode slot before its sim-worker bound it.
import * as net from 'net';
import { consecutiveFreePorts, ephemeralPortRange } from '../../src/cli/local/processes';

describe('disagg local port choice', () => {
  test('the ephemeral range is read from the kernel', () => {
    const [low, high] = ephemeralPortRange();
    expect(low).toBeGreaterThan(1023);
    expect(high).toBeGreaterThanOrEqual(low);
    expect(high).toBeLessThanOrEqual(65_535);
  });

  test('blocks of consecutive ports lie outside the ephemeral range, and are free', async () => {
    const [low, high] = ephemeralPortRange();
    for (let i = 0; i < 20; i++) {
      const n = 1 + (i % 12);
      const base = await consecutiveFreePorts(n);
      // WHEN a block is chosen THEN none of its ports is one the kernel gives outbound connections
      for (let p = base; p < base + n; p++) expect(p < low || p > high).toBe(true);
      // AND each binds now
      for (let p = base; p < base + n; p++) {
        await new Promise<void>((resolve, reject) => {
          const s = net.createServer();
          s.once('error', reject);
          s.listen(p, '127.0.0.1', () => s.close(() => resolve()));
        });
      }
    }
  });
});
