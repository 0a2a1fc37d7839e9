import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { parseAllDocuments } from 'yaml';
import { disagg } from './util';

// `disagg synth --instance trn2.48xlarge` emits what vLLM Neuron takes (src/k8s/private/neuron.ts cites
// the Neuron docs): the model's own BF16 weights (no --quantization), TP counted in logical
// NeuronCores, whole Trainium devices, NIXL over LIBFABRIC, the engine-neuron image and the Neuron AMI.
describe('disagg synth on Trainium', () => {
  let outdir: string;
  let json: any;

  beforeAll(async () => {
    // GIVEN an empty output folder, WHEN the default deployment is synthesized on trn2.48xlarge
    outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-synth-trn2-'));
    const run = await disagg('synth', '--instance', 'trn2.48xlarge', '--out', outdir, '--json');
    expect(run.err).toBe('');
    expect(run.code).toBe(0);
    json = JSON.parse(run.out);
  });

  afterAll(() => fs.rmSync(outdir, { recursive: true, force: true }));

  test('the workers get Neuron arguments and resources', () => {
    const docs = parseAllDocuments(fs.readFileSync(json.kubernetes.manifestFile, 'utf8')).map((d) => d.toJS());
    const prefill = docs.find((d) => d.kind === 'Deployment' && /prefill$/.test(d.metadata.name));
    const c = prefill.spec.template.spec.containers[0];
    const args: string[] = c.args;
    // THEN TP4 devices x 4 logical cores (LNC 2) = 16 ranks, no CUDA quantization, KV over LIBFABRIC
    expect(args[args.indexOf('--tensor-parallel-size') + 1]).toBe('16');
    expect(args).not.toContain('--quantization');
    expect(args[args.indexOf('--kv-cache-dtype') + 1]).toBe('auto');
    expect(JSON.parse(args[args.indexOf('--kv-transfer-config') + 1])).toMatchObject({ kv_role: 'kv_producer', kv_connector_extra_config: { backends: ['LIBFABRIC'] } });
    expect(c.resources.limits['aws.amazon.com/neuron']).toBe(4);
    expect(c.image).toBe('REPLACE_WITH_ENGINE_NEURON_IMAGE_URI');
    expect(json.pools.prefill).toMatchObject({ replicas: 2, nodes: 1, tensorParallel: 4 });
    expect(json.warnings).toEqual([]);
  });

  test('the stack runs Neuron nodes and builds the engine-neuron image', () => {
    const template = JSON.parse(fs.readFileSync(json.cloudFormation.templateFile, 'utf8'));
    const nodegroups = Object.values<any>(template.Resources).filter((r) => r.Type === 'AWS::EKS::Nodegroup');
    expect(nodegroups.filter((n) => n.Properties.AmiType === 'AL2023_x86_64_NEURON')).toHaveLength(2);
    const assets = JSON.parse(fs.readFileSync(path.join(outdir, 'cdk', 'DisaggDefault.assets.json'), 'utf8'));
    const images = Object.values<any>(assets.dockerImages ?? {});
    // AND the router's slim image (system nodes run no model)
    expect(images.map((i) => i.source.dockerFile).sort()).toEqual(['images/engine-neuron/Dockerfile', 'images/engine-slim/Dockerfile']);
  });

  test.each([
    ['FP8 weights quantized at load time', ['--instance', 'trn2.48xlarge', '--weight-precision', 'fp8'], /--weight-precision fp8 on trn2.48xlarge: vLLM Neuron does not quantize at load time.*use --weight-precision bf16/],
    ['trn1, where vLLM Neuron has no P/D', ['--instance', 'trn1.32xlarge'], /vLLM Neuron supports disaggregated prefill\/decode on Trn2 and Trn3, not on Trainium/],
  ])('%s: exit 2 with the reason', async (_, flags, message) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'disagg-synth-trn-bad-'));
    try {
      const { code, err } = await disagg('synth', ...flags, '--out', dir);
      expect(code).toBe(2);
      expect(err).toMatch(message);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
