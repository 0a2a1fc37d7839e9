import { container, defaultProps, env, find, flag, noEfaInstanceType, synthInference } from './util';
import { AcceleratedInstanceType, KvTransfer } from '../../src';

describe('KV transfer selection', () => {
  test('EFA on both pools: NIXL over LIBFABRIC, no warning', () => {
    // GIVEN p5en pools WHEN synthesized
    const { inference } = synthInference(defaultProps());
    // THEN
    expect(inference.nixlBackend).toBe('LIBFABRIC');
    expect(inference.warnings).toEqual([]);
  });

  test('no EFA: UCX (TCP) fallback with a warning, no EFA resources or env', () => {
    // GIVEN pools without EFA WHEN synthesized
    const { manifests, inference } = synthInference(defaultProps({
      maxContext: 8192,
      prefill: { instanceType: noEfaInstanceType(), tensorParallel: 4 },
      decode: { instanceType: noEfaInstanceType(), tensorParallel: 4 },
    }));
    const c = container(find(manifests, 'Deployment', '-decode'));
    // THEN
    expect(inference.nixlBackend).toBe('UCX');
    expect(inference.warnings.some(w => w.startsWith('disagg:tcpKvTransfer'))).toBe(true);
    expect(inference.node.metadata.some(m => m.type === 'disagg:warning')).toBe(true);
    expect(JSON.parse(flag(c.args, '--kv-transfer-config')!).kv_connector_extra_config.backends).toEqual(['UCX']);
    expect(c.resources.limits['vpc.amazonaws.com/efa']).toBeUndefined();
    expect(c.resources.limits['hugepages-2Mi']).toBeUndefined();
    expect(env(c, 'FI_PROVIDER')).toBeUndefined();
  });

  test('EFA on one pool only falls back for both (the connector must match)', () => {
    // GIVEN a p5en prefill and a non-EFA decode WHEN synthesized
    const { manifests, inference } = synthInference(defaultProps({
      maxContext: 8192,
      decode: { instanceType: noEfaInstanceType(), tensorParallel: 4 },
    }));
    // THEN
    expect(inference.nixlBackend).toBe('UCX');
    expect(JSON.parse(flag(container(find(manifests, 'Deployment', '-prefill')).args, '--kv-transfer-config')!).kv_connector_extra_config.backends).toEqual(['UCX']);
  });

  test('UCX can be forced on EFA instances', () => {
    // GIVEN WHEN
    const { inference } = synthInference(defaultProps({ kvTransfer: KvTransfer.NIXL_UCX }));
    // THEN
    expect(inference.nixlBackend).toBe('UCX');
    expect(AcceleratedInstanceType.P5EN_48XLARGE.supportsEfa).toBe(true);
  });
});
