// `disagg local --expert-parallel`: the wide-EP P/D shape (DisaggregatedInference with
// ExpertParallelPool sides and per-rank endpoints) on loopback, one sim-worker per data-parallel
// rank grouped into pods, routed per rank through the construct's router configuration.
// Needs an engine binary whose sim-worker has --data-parallel-rank (DISAGG_ENGINE_BIN); skipped without.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { disagg } from './util';
import { EXPERT_PARALLEL_DEPLOYMENT, expertParallelRanksProblem, localExpertParallelDeployment, rankEndpoints, routerConfigFor } from '../../src/cli/local/deployment';
import { routerConfigValidator } from '../k8s/util';

const ROOT = path.join(__dirname, '..', '..');
const BINARY = process.env.DISAGG_ENGINE_BIN ?? path.join(ROOT, 'engine', 'build', 'disagg-engine');
const built = fs.existsSync(BINARY) && spawnSync(BINARY, ['router', '--help']).status === 0 &&
  spawnSync(BINARY, ['sim-worker', '--help'], { encoding: 'utf8' }).stdout.includes('--data-parallel-rank');
if (!built) {
  // eslint-disable-next-line no-console
  console.warn(`disagg local --expert-parallel end-to-end test skipped: ${BINARY} lacks the sim-worker's --data-parallel-rank`);
}

jest.setTimeout(180_000);

describe('disagg local --expert-parallel', () => {
  test('the router configuration is the construct\'s per-rank one; each pod\'s ranks get its port block and vLLM\'s KV-event offsets', () => {
    // GIVEN the EP shape: 1 prefill group of 2 ranks (one p5en node, TP4 each) and 2 decode groups
    // of 16 ranks (two nodes each)
    const d = localExpertParallelDeployment({ prefillRanks: 2, decodeRanks: 16, prefillGroups: 1, decodeGroups: 2 });
    // THEN the construct's router file lists each pod's per-rank ports, KV events from 5557 up
    expect(d.config.pools.map(p => [p.name, (p.discovery as any).ports, p.kvEvents?.port])).toEqual([
      ['prefill', [8000, 8001], 5557],
      ['decode', [8000, 8001, 8002, 8003, 8004, 8005, 8006, 8007], 5557],
    ]);
    const eight = [8000, 8001, 8002, 8003, 8004, 8005, 8006, 8007];
    expect(d.pools.map(p => p.ranks)).toEqual([
      {
        groups: 1,
        podsPerGroup: 1,
        ranksPerPod: 2,
        ranksPerGroup: 2,
        tensorParallel: 4,
        expertParallel: 8,
        httpPorts: eight.slice(0, 2),
        kvEventsPort: 5557,
      },
      { groups: 2, podsPerGroup: 2, ranksPerPod: 8, ranksPerGroup: 16, tensorParallel: 1, expertParallel: 16, httpPorts: eight, kvEventsPort: 5557 },
    ]);
    // AND the MLA model's block size is vLLM's (64), which the router and sim-workers share
    expect(d.kvBlockSize).toBe(64);
    expect(d.description).toBe('deepseek-v3 FP8 prefill EP8 (DP2 x TP4), decode EP16 (DP16 x TP1) on p5en.48xlarge');
    // WHEN the second decode pod of a group is placed at local ports 30000.. / KV 40000..
    const pod1 = rankEndpoints(d.pools[1], 30000, 40000, 1);
    // THEN its ranks are 8-15 on consecutive ports, each publishing on 40000 + local rank, its sim-worker
    // configured with 40000 - 8 (the pod script's base - first rank) so vLLM's rank offset lands it there
    expect(pod1.map(e => [e.dataParallelRank, e.port, e.kvEventsEndpoint, e.kvEventsConfiguredPort + e.dataParallelRank])).toEqual(
      Array.from({ length: 8 }, (_, j) => [8 + j, 30000 + j, `tcp://127.0.0.1:${40000 + j}`, 40000 + j]));
    // AND the router's file with those endpoints carries each rank and fits the engine's schema
    const config = routerConfigFor(d, pod1);
    expect(config.endpoints!.map(e => e.dataParallelRank)).toEqual([8, 9, 10, 11, 12, 13, 14, 15]);
    expect(Object.keys(config.endpoints![0]).sort()).toEqual(['dataParallelRank', 'kvEventsEndpoint', 'pool', 'url']);
    const validate = routerConfigValidator();
    validate(config);
    expect(validate.errors ?? []).toEqual([]);
    // AND rank counts that do not fill whole nodes are refused with the ones that do
    expect(expertParallelRanksProblem(3)).toBe('3 ranks do not fill whole p5en.48xlarge nodes of 8 accelerators; use 1, 2, 4, 8 (one node) or a multiple of 8');
    expect(expertParallelRanksProblem(24)).toBeUndefined();
    expect(EXPERT_PARALLEL_DEPLOYMENT.model.name).toBe('deepseek-v3');
  });

  test('bad flags are usage errors that name the fix', async () => {
    expect((await disagg('local', '--decode-ranks', '4')).err).toMatch(/--prefill-ranks and --decode-ranks size the groups of --expert-parallel; add --expert-parallel/);
    expect((await disagg('local', '--expert-parallel', '--decode-ranks', '6')).err).toMatch(/--decode-ranks 6: 6 ranks do not fill whole p5en\.48xlarge nodes/);
    expect((await disagg('local', '--expert-parallel', '--replicas', '2')).err).toMatch(/--replicas is for an aggregated run; with --expert-parallel leave it out/);
    const many = await disagg('local', '--expert-parallel', '--decode-ranks', '16', '--decode-replicas', '2');
    expect(many.code).toBe(2);
    expect(many.err).toMatch(/at most 32 sim-workers run locally; got 34 \(1 x 2 prefill \+ 2 x 16 decode ranks\)/);
  });

  (built ? test : test.skip)('a P/D workload through the router: 0 failures, every rank used, per-rank load reported', async () => {
    // GIVEN 1 prefill group of 2 ranks and 2 decode groups of 2 ranks (6 sim-workers in 3 pods)
    // WHEN disagg local runs 48 requests under the KV-aware policy and round robin
    const { code, out, err } = await disagg('local', '--expert-parallel', '--prefill-ranks', '2', '--decode-ranks', '2', '--decode-replicas', '2',
      '--requests', '48', '--speedup', '4', '--json', '--engine', BINARY);
    // THEN every request succeeds under both policies
    expect(err).toBe('');
    expect(code).toBe(0);
    const report = JSON.parse(out);
    expect(report.deployment.mode).toBe('expert-parallel');
    expect(report.runs.map((r: any) => r.policy)).toEqual(['kv-aware', 'round-robin']);
    for (const r of report.runs) {
      expect(r.failed).toBe(0);
      expect(r.succeeded).toBe(48);
      // AND every rank served requests: 2 prefill ranks, 2 x 2 decode ranks, none idle
      expect(r.ranks.map((k: any) => [k.pool, k.group, k.pod, k.rank])).toEqual([
        ['prefill', 0, 0, 0], ['prefill', 0, 0, 1],
        ['decode', 0, 0, 0], ['decode', 0, 0, 1], ['decode', 1, 0, 0], ['decode', 1, 0, 1],
      ]);
      expect(r.idleRanks).toEqual([]);
      for (const k of r.ranks) {
        expect(k.requests).toBeGreaterThan(0);
        expect(k.promptTokens).toBeGreaterThan(0);
        // the router sent it what it served, and knows its rank
        expect(k.routedLegs).toBe(k.requests);
        expect(k.routerRank).toBe(k.rank);
      }
      // AND the decode ranks answered every request between them, pulling KV from the prefill ranks
      const decode = r.ranks.filter((k: any) => k.pool === 'decode');
      const prefill = r.ranks.filter((k: any) => k.pool === 'prefill');
      expect(decode.reduce((n: number, k: any) => n + k.requests, 0)).toBe(48);
      expect(decode.reduce((n: number, k: any) => n + k.kvTransfers, 0)).toBe(prefill.reduce((n: number, k: any) => n + k.kvTransfers, 0));
      expect(Object.keys(r.endpoints).sort()).toEqual(decode.map((k: any) => k.endpoint).sort());
    }
    // AND the shared system prompts were found cached on the decode ranks the KV-aware policy chose
    const decodeRanks = report.runs[0].ranks.filter((k: any) => k.pool === 'decode');
    expect(decodeRanks.reduce((n: number, k: any) => n + k.cachedTokens, 0)).toBeGreaterThan(0);
    // AND every process it started (6 sim-workers + router, twice) has exited
    expect(report.processes).toHaveLength(14);
  });
});
