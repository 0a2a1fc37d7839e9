import { container, defaultProps, env, find, synthInference } from './util';
import { ModelSource } from '../../src';

describe('worker environment', () => {
  test('NIXL side channel host is the pod IP; hash seed fixed; EFA provider set', () => {
    // GIVEN the default configuration WHEN synthesized
    const { manifests } = synthInference(defaultProps());
    const c = container(find(manifests, 'Deployment', '-decode'));
    // THEN
    expect(env(c, 'VLLM_NIXL_SIDE_CHANNEL_HOST')).toEqual({ name: 'VLLM_NIXL_SIDE_CHANNEL_HOST', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } });
    expect(env(c, 'POD_IP').valueFrom.fieldRef.fieldPath).toBe('status.podIP');
    expect(env(c, 'VLLM_NIXL_SIDE_CHANNEL_PORT').value).toBe('5600');
    expect(env(c, 'PYTHONHASHSEED').value).toBe('0');
    expect(env(c, 'FI_PROVIDER').value).toBe('efa');
    expect(env(c, 'FI_EFA_USE_DEVICE_RDMA').value).toBe('1');
  });

  test('the HF token comes from the Secret', () => {
    // GIVEN a token secret with a custom key WHEN synthesized
    const { manifests } = synthInference(defaultProps({
      modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct', { tokenSecret: { name: 'hf', key: 'HF_TOKEN' } }),
    }));
    // THEN
    expect(env(container(find(manifests, 'Deployment', '-prefill')), 'HF_TOKEN').valueFrom).toEqual({ secretKeyRef: { name: 'hf', key: 'HF_TOKEN' } });
  });

  test('prefill keeps HTTP connections alive for the router; decode does not need it', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps());
    // THEN
    expect(env(container(find(manifests, 'Deployment', '-prefill')), 'VLLM_HTTP_TIMEOUT_KEEP_ALIVE').value).toBe('120');
    expect(env(container(find(manifests, 'Deployment', '-decode')), 'VLLM_HTTP_TIMEOUT_KEEP_ALIVE')).toBeUndefined();
  });

  test('no HF_TOKEN without a secret', () => {
    // GIVEN a public source WHEN synthesized
    const { manifests } = synthInference(defaultProps({ modelSource: ModelSource.huggingFace('meta-llama/Llama-3.3-70B-Instruct') }));
    // THEN
    expect(env(container(find(manifests, 'Deployment', '-decode')), 'HF_TOKEN')).toBeUndefined();
  });
});
