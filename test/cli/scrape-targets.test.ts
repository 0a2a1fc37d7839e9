// `disagg local --scrape-targets`: the run's processes as Prometheus file_sd groups, labelled as the
// constructs' PodMonitor and ServiceMonitor label a deployment's series.
import * as fs from 'fs';
import * as path from 'path';
import { tmpdir } from './util';
import { UsageError } from '../../src/cli/command';
import { scrapeTargetGroups, scrapeTargetsOf, writeScrapeTargets } from '../../src/cli/local/scrape-targets';

const live = [
  { name: 'router', url: 'http://127.0.0.1:41000' },
  { name: 'prefill-0', url: 'http://127.0.0.1:41001' },
  { name: 'decode-0', url: 'http://127.0.0.1:41002' },
  { name: 'decode-g0-pod1-rank3', url: 'http://127.0.0.1:41003' },
  { name: 'prefill-1', url: 'http://127.0.0.1:41004' },
];

describe('disagg local scrape targets', () => {
  test('the router under <name>-router, the sim-workers per pool under <name>-workers, with deployment and namespace', () => {
    expect(scrapeTargetGroups(live, { deployment: 'llama', namespace: 'inference' })).toEqual([
      { targets: ['127.0.0.1:41000'], labels: { job: 'llama-router', deployment: 'llama', namespace: 'inference' } },
      { targets: ['127.0.0.1:41002', '127.0.0.1:41003'], labels: { job: 'llama-workers', deployment: 'llama', namespace: 'inference', pool: 'decode' } },
      { targets: ['127.0.0.1:41001', '127.0.0.1:41004'], labels: { job: 'llama-workers', deployment: 'llama', namespace: 'inference', pool: 'prefill' } },
    ]);
  });

  test('the file is rewritten whole, and the flag names a file in a folder that exists', () => {
    const dir = tmpdir('scrape');
    try {
      const file = path.join(dir, 'targets.json');
      writeScrapeTargets(live, { file, deployment: 'llama' });
      writeScrapeTargets(live.slice(0, 1), { file, deployment: 'llama' });
      expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual([{ targets: ['127.0.0.1:41000'], labels: { job: 'llama-router', deployment: 'llama' } }]);
      expect(fs.readdirSync(dir)).toEqual(['targets.json']);
      expect(scrapeTargetsOf(undefined, { name: 'llama', namespace: 'inference' })).toBeUndefined();
      expect(() => scrapeTargetsOf(path.join(dir, 'nope', 't.json'), { name: 'llama', namespace: 'inference' })).toThrow(UsageError);
      expect(() => scrapeTargetsOf(path.join(dir, 'nope', 't.json'), { name: 'llama', namespace: 'inference' })).toThrow(/must be a file in an existing folder/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
