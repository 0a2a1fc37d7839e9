import { defaultProps, noEfaInstanceType, reportSkipped, synthInference, validateManifests } from './util';
import { AcceleratedInstanceType, GatewayExposure } from '../../src';

describe('every synthesized object validates against its schema', () => {
  test.each([
    ['default P/D with a new Gateway', defaultProps()],
    ['InferencePool exposure', defaultProps({
      gateway: GatewayExposure.inferencePool({ gateway: { name: 'shared', namespace: 'gateways' }, endpointPickerService: 'epp' }),
    })],
    ['existing Gateway, multi-node decode (LeaderWorkerSet)', defaultProps({
      gateway: GatewayExposure.existingGateway({ name: 'shared', hostnames: ['llm.example.com'] }),
      decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 8, pipelineParallel: 2 },
    })],
    ['L40S nodes without EFA (TCP fallback)', defaultProps({
      gateway: GatewayExposure.none(),
      prefill: { instanceType: noEfaInstanceType(), tensorParallel: 4 },
      decode: { instanceType: noEfaInstanceType(), tensorParallel: 4 },
      maxContext: 8192,
    })],
  ])('%s', (_name, props) => {
    // GIVEN a configuration WHEN it is synthesized
    const { manifests } = synthInference(props);
    // THEN every object passes its schema
    const result = validateManifests(manifests);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
  });

  test('the validator rejects a broken object (it can fail)', () => {
    // GIVEN a synthesized Deployment with a string where an integer belongs, and a broken LeaderWorkerSet
    const { manifests } = synthInference(defaultProps());
    const broken = JSON.parse(JSON.stringify(manifests.find(m => m.kind === 'Deployment')));
    broken.spec.replicas = 'two';
    const lws = { apiVersion: 'leaderworkerset.x-k8s.io/v1', kind: 'LeaderWorkerSet', metadata: { name: 'x' }, spec: { leaderWorkerTemplate: { size: 'big' } } };
    // WHEN validated
    const result = validateManifests([broken, lws]);
    // THEN both are reported (the LWS only when the CRDs are present)
    expect(result.errors.some(e => e.includes('replicas'))).toBe(true);
    if (result.skipped.length === 0) {
      expect(result.errors.some(e => e.startsWith('LeaderWorkerSet/x'))).toBe(true);
    }
  });
});
