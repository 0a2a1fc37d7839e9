import { container, deepseekEpPdProps, defaultProps, find, flag, synthChart, synthInference, wideEpProps } from './util';
import { DisaggregatedInference, ExpertParallelPool, KvLoadFailurePolicy, PoolRole } from '../../src';

/** The parsed --kv-transfer-config of a pool's server (a Deployment's container, or an LWS leader's). */
function transferConfig(manifests: any[], suffix: string): Record<string, unknown> {
  const lws = manifests.find(m => m.kind === 'LeaderWorkerSet' && m.metadata.name.endsWith(suffix));
  const args: string[] = lws ? container(lws, 'leaderTemplate').args : container(find(manifests, 'Deployment', suffix)).args;
  return JSON.parse(flag(args, '--kv-transfer-config')!);
}

describe('kv_load_failure_policy of the decode pool', () => {
  test('default: the decode pool fails a request whose KV pull failed (the router retries it decode-only)', () => {
    // GIVEN the default P/D deployment WHEN synthesized
    const { manifests } = synthInference(defaultProps());
    // THEN the decode pool says so explicitly (vLLM's own default changed between releases)
    expect(transferConfig(manifests, '-decode').kv_load_failure_policy).toBe('fail');
    // AND the prefill pool, which never pulls, carries none
    expect(transferConfig(manifests, '-prefill')).not.toHaveProperty('kv_load_failure_policy');
  });

  test('RECOMPUTE: the decode pod recomputes the blocks it could not load', () => {
    const { manifests } = synthInference(defaultProps({ kvLoadFailurePolicy: KvLoadFailurePolicy.RECOMPUTE }));
    expect(transferConfig(manifests, '-decode')).toEqual({
      kv_connector: 'NixlConnector',
      kv_role: 'kv_consumer',
      kv_connector_extra_config: { backends: ['LIBFABRIC'], kv_lease_duration: 300 },
      kv_load_failure_policy: 'recompute',
    });
  });

  test('an expert-parallel decode side gets the policy too', () => {
    // GIVEN DeepSeek-V3 with a wide-EP decode side WHEN synthesized with RECOMPUTE
    const { manifests } = synthChart(c => new DisaggregatedInference(c, 'Ds',
      deepseekEpPdProps(undefined, { kvLoadFailurePolicy: KvLoadFailurePolicy.RECOMPUTE })));
    // THEN the LWS leader's config carries it, and the prefill pool's does not
    expect(transferConfig(manifests, '-decode').kv_load_failure_policy).toBe('recompute');
    expect(transferConfig(manifests, '-prefill')).not.toHaveProperty('kv_load_failure_policy');
  });

  test('a stand-alone expert-parallel decode pool says what a failed pull does: FAIL unless given', () => {
    // GIVEN stand-alone wide-EP pools with the decode role (behind someone else's router) WHEN synthesized
    const policyOf = (props: Parameters<typeof wideEpProps>[0]) => transferConfig(synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps(props))).manifests, '-decode');
    // THEN vLLM's kv_load_failure_policy is written explicitly (its default changed between releases)
    expect(policyOf({ role: PoolRole.DECODE }).kv_load_failure_policy).toBe('fail');
    expect(policyOf({ role: PoolRole.DECODE, kvLoadFailurePolicy: KvLoadFailurePolicy.RECOMPUTE }).kv_load_failure_policy).toBe('recompute');
    // AND a prefill pool, which never pulls, carries none
    expect(transferConfig(synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({ role: PoolRole.PREFILL }))).manifests, '-prefill'))
      .not.toHaveProperty('kv_load_failure_policy');
  });

  test('a stand-alone expert-parallel pool that does not pull KV cache refuses the policy, naming the fix', () => {
    for (const role of [PoolRole.PREFILL, PoolRole.SERVE]) {
      expect(() => synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({ role, kvLoadFailurePolicy: KvLoadFailurePolicy.RECOMPUTE }))))
        .toThrow(new RegExp(`'kvLoadFailurePolicy' \\(recompute\\) applies to a pool that pulls KV cache, the decode role, not '${role.name}'; remove it or set role: PoolRole.DECODE`));
    }
  });

  test("inside a DisaggregatedInference the deployment's policy applies to the EP decode side, and the prefill side accepts it", () => {
    const { manifests } = synthChart(c => new DisaggregatedInference(c, 'Ds', deepseekEpPdProps(undefined, {
      prefill: undefined,
      prefillExpertParallel: { instanceType: deepseekEpPdProps().prefill!.instanceType, nodesPerGroup: 1 },
      kvLoadFailurePolicy: KvLoadFailurePolicy.RECOMPUTE,
    })));
    expect(transferConfig(manifests, '-decode').kv_load_failure_policy).toBe('recompute');
    expect(transferConfig(manifests, '-prefill')).not.toHaveProperty('kv_load_failure_policy');
  });
});
