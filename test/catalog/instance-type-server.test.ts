import * as fs from 'fs';
import * as path from 'path';
import Ajv2020 from 'ajv/dist/2020';
import { expectedLayout } from './util';
import { AcceleratedInstanceType, Accelerator, ModelArchitecture, Precision, PurchaseOption } from '../../src';
import { costSections, planFor, simulationConfig } from '../../src/engine/engine-config-builder';

// The published P/D measurements ran on servers that are no EC2 instance type (DistServe's A100-80GB
// nodes, the Mooncake team's H800 and A10 servers): AcceleratedInstanceType.server() describes one from an
// accelerator, a count and the network between servers, and the sizing and the engine configuration take it
// where they take an EC2 type.
const SCHEMA = path.resolve(__dirname, '..', '..', 'engine', 'schema', 'engine-config.schema.json');

describe('AcceleratedInstanceType.server', () => {
  test('defaults: a derived name, one card without EFA, host numbers from the accelerators', () => {
    // GIVEN an 8 x H800 server with 8 x 200 Gbit/s RoCE NICs (Mooncake's H800 nodes)
    const t = AcceleratedInstanceType.server({ accelerator: Accelerator.H800, acceleratorCount: 8, networkBandwidthGbps: 1600 });
    // THEN it carries the devices and the fabric, and nothing EC2-specific
    expect(t.name).toBe('h800-server.8x');
    expect(t.family).toBe('h800-server');
    expect([t.accelerator, t.acceleratorCount, t.networkBandwidthGbps]).toEqual([Accelerator.H800, 8, 1600]);
    expect(t.totalAcceleratorMemoryGib).toBe(640);
    expect([t.vcpus, t.memoryGib, t.localNvmeTotalGb]).toEqual([128, 1280, 0]);
    expect(t.supportsEfa).toBe(false);
    expect(t.networkInterfaceLayout()).toEqual(expectedLayout([], false));
    expect(t.efaInterfacesFor(8)).toBe(0);
    expect(t.purchaseOptions).toEqual([PurchaseOption.ON_DEMAND]);
    // AND it is not in the EC2 catalog
    expect(AcceleratedInstanceType.all()).not.toContain(t);
    expect(() => AcceleratedInstanceType.fromName(t.name)).toThrow(/Unknown instance type 'h800-server\.8x'/);
  });

  test('names derived from any accelerator name are valid; an explicit name and host numbers are kept', () => {
    expect(AcceleratedInstanceType.server({ accelerator: Accelerator.A100_80GB, acceleratorCount: 8, networkBandwidthGbps: 25 }).name)
      .toBe('a100-80gb-server.8x');
    const custom = Accelerator.of({ ...props(Accelerator.A10), name: 'A10 (PCIe)' });
    expect(AcceleratedInstanceType.server({ accelerator: custom, acceleratorCount: 4, networkBandwidthGbps: 200 }).name).toBe('a10-pcie-server.4x');
    const t = AcceleratedInstanceType.server({
      accelerator: Accelerator.A10,
      acceleratorCount: 4,
      networkBandwidthGbps: 200,
      name: 'mooncake-a10.4x',
      vcpus: 64,
      memoryGib: 512,
      localNvmeCount: 1,
      localNvmeGbEach: 1920,
    });
    expect([t.name, t.vcpus, t.memoryGib, t.localNvmeTotalGb]).toEqual(['mooncake-a10.4x', 64, 512, 1920]);
  });

  test.each([
    ['acceleratorCount', { acceleratorCount: 0 }, /server of H800: 'acceleratorCount' \(0\) must be a positive integer, the accelerators of one server/],
    ['fractional acceleratorCount', { acceleratorCount: 1.5 }, /'acceleratorCount' \(1\.5\) must be a positive integer/],
    ['networkBandwidthGbps', { networkBandwidthGbps: 0 }, /instance type 'h800-server\.8x': 'networkBandwidthGbps' \(0\) must be a positive number/],
    ['name', { name: 'H800 box' }, /server of H800: 'name' \('H800 box'\) must be 'family\.size' in lower case, e\.g\. 'h800-server\.8x'; or omit it/],
    ['localNvmeGbEach', { localNvmeCount: 2 }, /'localNvmeGbEach' \(0\) must be positive when 'localNvmeCount' is 2/],
  ])('rejects a bad %s, naming the field and the value', (_, patch, message) => {
    expect(() => AcceleratedInstanceType.server({
      accelerator: Accelerator.H800, acceleratorCount: 8, networkBandwidthGbps: 1600, ...patch,
    })).toThrow(message);
  });
});

describe('the engine configuration on a server outside EC2', () => {
  test('Mooncake\'s H800 node: the hardware section is the accelerator\'s numbers and the NICs\' bandwidth', () => {
    // GIVEN Qwen3-8B at TP 8 on an 8 x H800 server with 1600 Gbit/s of RoCE
    const server = AcceleratedInstanceType.server({ accelerator: Accelerator.H800, acceleratorCount: 8, networkBandwidthGbps: 1600 });
    const plan = planFor({ model: ModelArchitecture.QWEN3_8B, maxContext: 32768 }, server, 8);
    // WHEN the cost sections are built
    const { model, hardware } = costSections(plan, Precision.BF16);
    // THEN peak FLOP/s, HBM and NVLink come from the H800, the fabric from the server's NICs (a whole-node pod)
    expect(hardware).toEqual({
      peakFlopsPerSecond: 989e12,
      // (BF16 KV cache: attention at the BF16 rate too)
      attentionFlopsPerSecond: 989e12,
      hbmBytesPerSecond: 3350e9,
      interconnectBytesPerSecond: 200e9,
      fabricBytesPerSecond: 1600e9 / 8,
    });
    // AND the model section is Qwen3-8B's
    expect(model.kvBytesPerToken).toBe(2 * 36 * 8 * 128 * 2);
    expect(model.activeParameters).toBe(ModelArchitecture.QWEN3_8B.parametersActive);
  });

  test('DistServe\'s OPT-13B on A100-80GB: FP16 weights of the two-matrix count, MHA KV, schema-valid P/D config', () => {
    // GIVEN DistServe's testbed: 8 x A100-80GB SXM per node, 25 Gbit/s between nodes
    const server = AcceleratedInstanceType.server({ accelerator: Accelerator.A100_80GB, acceleratorCount: 8, networkBandwidthGbps: 25 });
    const inputs = { model: ModelArchitecture.OPT_13B, maxContext: 2048, kvCachePrecision: Precision.FP16 };
    // WHEN one TP1 replica is planned
    const { model, hardware } = costSections(planFor(inputs, server, 1));
    // THEN the weights are the counted 12.85B parameters at 2 bytes, the KV 2 x 40 x 5120 x 2 bytes a token
    expect(model.weightBytesPerRank).toBe(2 * 12_853_473_280);
    expect(model.kvBytesPerToken).toBe(819_200);
    expect(model.activeParameters).toBe(12_853_473_280);
    // AND FP16 runs at the A100's 312 TFLOP/s; a TP1 pod gets an eighth of the node's 25 Gbit/s
    expect(hardware.peakFlopsPerSecond).toBe(312e12);
    expect(hardware.hbmBytesPerSecond).toBe(2039e9);
    expect(hardware.fabricBytesPerSecond).toBeCloseTo(25e9 / 8 / 8, 0);
    // AND DistServe's c21d11 layout (prefill TP2 + decode TP1) builds a configuration the engine's schema accepts
    const config = simulationConfig({
      ...inputs,
      instanceType: server,
      prefill: { replicas: 1, tensorParallel: 2 },
      decode: { replicas: 1, tensorParallel: 1 },
      workload: { requests: 100 },
    });
    const validate = new Ajv2020({ allErrors: true, strict: true }).compile(JSON.parse(fs.readFileSync(SCHEMA, 'utf8')));
    expect(validate(config)).toBe(true);
    expect(validate.errors ?? []).toEqual([]);
    expect(config.pools!.map(p => [p.role, p.tensorParallel])).toEqual([['prefill', 2], ['decode', 1]]);
  });

  test('Mooncake\'s A10 point: Qwen2.5-7B GPTQ-Int4 fits one 24 GB A10 and computes at the BF16 rate', () => {
    const server = AcceleratedInstanceType.server({ accelerator: Accelerator.A10, acceleratorCount: 4, networkBandwidthGbps: 200 });
    const plan = planFor({ model: ModelArchitecture.QWEN2_5_7B, weightPrecision: Precision.INT4, maxContext: 8192 }, server, 1);
    const { model, hardware } = costSections(plan, Precision.INT4);
    // INT4 weights with their group-128 scales and zeros; GPTQ is weight-only, so the math runs at 125 TFLOP/s
    expect(model.weightBytesPerRank).toBe(Math.round(ModelArchitecture.QWEN2_5_7B.parametersTotal * Precision.INT4.bytesPerElement));
    expect(hardware.peakFlopsPerSecond).toBe(125e12);
    expect(hardware.interconnectBytesPerSecond).toBe(32e9);
    expect(plan.kvTokens).toBeGreaterThan(8192);
  });
});

/** An accelerator's props read back from its public surface. */
function props(a: Accelerator) {
  return {
    name: a.name,
    vendor: a.vendor,
    memoryGib: a.memoryGib,
    hbmBandwidthGBps: a.hbmBandwidthGBps,
    peakTflopsBf16: a.peakTflops(Precision.BF16),
    interconnectGBps: a.interconnectGBps,
    interconnect: a.interconnect,
  };
}
