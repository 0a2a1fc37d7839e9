import * as fs from 'fs';
import * as path from 'path';
import { container, defaultProps, find, flag, synthInference } from './util';
import { AcceleratedInstanceType, ModelSource, Precision, VllmVersion } from '../../src';

describe('vLLM arguments of the workers', () => {
  test('default P/D: served model, parallelism, memory, block size, KV dtype and quantization', () => {
    // GIVEN the default configuration WHEN synthesized
    const { manifests } = synthInference(defaultProps());
    const c = container(find(manifests, 'Deployment', '-decode'));
    const args: string[] = c.args;
    // THEN the server is `vllm serve <model>` (it refuses --model), and every sizing value lands in its flag
    expect(c.command).toEqual(['vllm', 'serve']);
    expect(args[0]).toBe('meta-llama/Llama-3.3-70B-Instruct');
    expect(args).not.toContain('--model');
    expect(flag(args, '--served-model-name')).toBe('meta-llama/Llama-3.3-70B-Instruct');
    expect(flag(args, '--tensor-parallel-size')).toBe('4');
    expect(flag(args, '--max-model-len')).toBe('32768');
    expect(flag(args, '--gpu-memory-utilization')).toBe('0.9');
    expect(flag(args, '--block-size')).toBe('16');
    expect(flag(args, '--kv-cache-dtype')).toBe('fp8');
    // BF16 checkpoint served in FP8: vLLM quantizes at load time.
    expect(flag(args, '--quantization')).toBe('fp8');
    expect(flag(args, '--port')).toBe('8000');
    expect(args).not.toContain('--pipeline-parallel-size');
  });

  test('KV transfer and KV events configs are the JSON vLLM expects', () => {
    // GIVEN the default configuration on EFA instances WHEN synthesized
    const { manifests } = synthInference(defaultProps());
    const args: string[] = container(find(manifests, 'Deployment', '-prefill')).args;
    // THEN NIXL uses LIBFABRIC, and KV events publish on ZMQ with a per-pod topic
    expect(JSON.parse(flag(args, '--kv-transfer-config')!)).toEqual({
      kv_connector: 'NixlConnector', kv_role: 'kv_producer', kv_connector_extra_config: { backends: ['LIBFABRIC'], kv_lease_duration: 300 },
    });
    expect(JSON.parse(flag(args, '--kv-events-config')!)).toEqual({
      enable_kv_cache_events: true,
      publisher: 'zmq',
      endpoint: 'tcp://*:5557',
      replay_endpoint: 'tcp://*:15557',
      topic: 'kv@$(POD_IP):8000@meta-llama/Llama-3.3-70B-Instruct',
    });
  });

  test('BF16 weights and KV: no --quantization, KV dtype auto', () => {
    // GIVEN native precision WHEN synthesized
    const { manifests } = synthInference(defaultProps({ weightPrecision: Precision.BF16, kvCachePrecision: Precision.BF16 }));
    const args: string[] = container(find(manifests, 'Deployment', '-decode')).args;
    // THEN
    expect(args).not.toContain('--quantization');
    expect(flag(args, '--kv-cache-dtype')).toBe('auto');
  });

  test('a prequantized checkpoint passes no --quantization', () => {
    // GIVEN an FP8 repository WHEN synthesized
    const { manifests } = synthInference(defaultProps({
      modelSource: ModelSource.huggingFace('RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic'),
      prequantizedCheckpoint: true,
    }));
    // THEN vLLM reads the scheme from the checkpoint
    expect(container(find(manifests, 'Deployment', '-decode')).args).not.toContain('--quantization');
  });

  test('an S3 source streams with the Run:ai loader and exports the Region', () => {
    // GIVEN an S3 model source WHEN synthesized
    const { manifests } = synthInference(defaultProps({ modelSource: ModelSource.s3('s3://models-bucket/llama-3.3-70b', { region: 'us-west-2' }) }));
    const c = container(find(manifests, 'Deployment', '-decode'));
    // THEN
    expect(c.args[0]).toBe('s3://models-bucket/llama-3.3-70b');
    expect(flag(c.args, '--load-format')).toBe('runai_streamer');
    expect(c.env).toContainEqual({ name: 'AWS_REGION', value: 'us-west-2' });
  });

  test('extraArgs come last; servedModelName overrides', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps({
      servedModelName: 'llama',
      decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, tensorParallel: 4, extraArgs: ['--max-num-seqs', '256'] },
    }));
    const args: string[] = container(find(manifests, 'Deployment', '-decode')).args;
    // THEN
    expect(args.slice(-2)).toEqual(['--max-num-seqs', '256']);
    expect(flag(args, '--served-model-name')).toBe('llama');
  });

  test('a replica spanning nodes becomes a LeaderWorkerSet running vLLM over Ray', () => {
    // GIVEN decode at TP8 x PP2 on 8-GPU nodes WHEN synthesized
    const { manifests, inference } = synthInference(defaultProps({
      decode: { instanceType: AcceleratedInstanceType.P5EN_48XLARGE, replicas: 1, tensorParallel: 8, pipelineParallel: 2 },
    }));
    const lws = find(manifests, 'LeaderWorkerSet');
    const leader = container(lws, 'leaderTemplate');
    const worker = container(lws, 'workerTemplate');
    // THEN a group of 2 pods, the leader serving with Ray, the worker joining the leader's Ray head
    expect(inference.decodeIsMultiNode).toBe(true);
    expect(lws.spec.leaderWorkerTemplate.size).toBe(2);
    expect(lws.spec.leaderWorkerTemplate.restartPolicy).toBe('RecreateGroupOnPodRestart');
    expect(flag(leader.args, '--pipeline-parallel-size')).toBe('2');
    expect(flag(leader.args, '--distributed-executor-backend')).toBe('ray');
    expect(leader.command.join(' ')).toContain('ray start --head');
    expect(worker.args[0]).toContain('--address=$(LWS_LEADER_ADDRESS):6379');
    expect(worker.startupProbe).toBeUndefined();
    // and the headless Service selects only the leaders
    expect(find(manifests, 'Service', '-decode').spec.selector['leaderworkerset.sigs.k8s.io/worker-index']).toBe('0');
  });

  test('the KV role follows the vLLM release: per pool since 0.22.1, kv_both before', () => {
    // GIVEN the release named, read from the image tag, or neither (the bundled image's, 0.31.0)
    const roles = (props: Record<string, unknown>) => {
      const { manifests } = synthInference(defaultProps(props));
      return ['-prefill', '-decode'].map((p) => JSON.parse(flag(container(find(manifests, 'Deployment', p)).args, '--kv-transfer-config')!).kv_role);
    };
    // THEN
    expect(roles({ vllmVersion: VllmVersion.V0_26_0 })).toEqual(['kv_producer', 'kv_consumer']);
    expect(roles({ image: 'vllm/vllm-openai:v0.26.0' })).toEqual(['kv_producer', 'kv_consumer']);
    expect(roles({ image: 'public.ecr.aws/deep-learning-containers/vllm:0.22.1-gpu-py312-cu129-ubuntu22.04-ec2' })).toEqual(['kv_producer', 'kv_consumer']);
    expect(roles({ image: 'public.ecr.aws/deep-learning-containers/vllm:0.22.0-gpu-py312-cu129-ubuntu22.04-ec2' })).toEqual(['kv_both', 'kv_both']);
    expect(roles({})).toEqual(['kv_producer', 'kv_consumer']);
    expect(roles({ vllmVersion: VllmVersion.V0_19_1 })).toEqual(['kv_both', 'kv_both']);
    // AND the decode side keeps its load-failure policy with its role
    const { manifests } = synthInference(defaultProps({ vllmVersion: VllmVersion.of('0.28.0') }));
    expect(JSON.parse(flag(container(find(manifests, 'Deployment', '-decode')).args, '--kv-transfer-config')!)).toEqual({
      kv_connector: 'NixlConnector',
      kv_role: 'kv_consumer',
      // The lease prefill holds unread blocks for (vLLM's 30 s default let decode read freed blocks).
      kv_connector_extra_config: { backends: ['LIBFABRIC'], kv_lease_duration: 300 },
      kv_load_failure_policy: 'fail',
    });
  });

  test('the bundled release is the one the worker image is built on, on both architectures', () => {
    // GIVEN the runtime bases of images/engine/Dockerfile
    const dockerfile = fs.readFileSync(path.join(__dirname, '..', '..', 'images', 'engine', 'Dockerfile'), 'utf8');
    const bases = [...dockerfile.matchAll(/^FROM (\S+) AS runtime-(amd64|arm64)$/gm)].map((m) => m[1]);
    // THEN each names VllmVersion.BUNDLED
    expect(bases.length).toBe(2);
    expect(bases.map((b) => VllmVersion.fromImage(b)?.version)).toEqual([VllmVersion.BUNDLED.version, VllmVersion.BUNDLED.version]);
  });

  test('a vLLM release is read from what image tags say, and a bad one is an error that shows the form', () => {
    // THEN
    expect(VllmVersion.fromImage('vllm/vllm-openai:v0.26.0')?.version).toBe('0.26.0');
    expect(VllmVersion.fromImage('public.ecr.aws/deep-learning-containers/vllm:0.28.0-gpu-py312-cu130-ubuntu24.04-ec2')?.version).toBe('0.28.0');
    expect(VllmVersion.fromImage('registry:5000/vllm:0.27.1rc1@sha256:0123abcd')?.version).toBe('0.27.1');
    expect(VllmVersion.fromImage('registry.example.com/disagg/engine:latest')).toBeUndefined();
    // The library's own engine image carries the library's version, not vLLM's.
    expect(VllmVersion.fromImage('registry.example.com/disagg/engine:0.1.0')).toBeUndefined();
    expect(VllmVersion.fromImage('public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.21.0.1.0.0-neuronx-py313-sdk2.31.0-ubuntu24.04')).toBeUndefined();
    expect(VllmVersion.fromImage('registry:5000/vllm')).toBeUndefined();
    expect(VllmVersion.of('v0.26.1').atLeast(VllmVersion.V0_26_0)).toBe(true);
    expect(VllmVersion.V0_19_1.atLeast(VllmVersion.V0_26_0)).toBe(false);
    expect(() => VllmVersion.of('0.26')).toThrow(/'vllmVersion' \('0.26'\) must be a vLLM release such as '0.26.0'/);
  });
});
