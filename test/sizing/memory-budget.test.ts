import { Accelerator, ModelArchitecture } from '../../src/catalog';
import { MemoryBudget } from '../../src/sizing';

const GIB = 1024 ** 3;

describe('MemoryBudget', () => {
  test('usable = memory x 0.9 by default; available subtracts runtime and activation reserves', () => {
    // GIVEN an H100 (80 GiB) with a 2 GiB activation reserve
    const budget = MemoryBudget.of({ accelerator: Accelerator.H100, activationReserveGib: 2 });
    // THEN it matches vLLM's arithmetic: 72 GiB usable, minus 1.5 + 2 GiB
    expect(budget.gpuMemoryUtilization).toBe(0.9);
    expect(budget.usableBytes).toBeCloseTo(72 * GIB, 0);
    expect(budget.reserveBytes).toBeCloseTo(3.5 * GIB, 0);
    expect(budget.availableBytes).toBeCloseTo(68.5 * GIB, 0);
    expect(budget.kvCacheBytes(60 * GIB)).toBeCloseTo(8.5 * GIB, 0);
    expect(budget.kvCacheBytes(70 * GIB)).toBeLessThan(0);
  });

  test('the KV cache takes what a higher utilization adds (disagg simulate --gpu-memory-utilization)', () => {
    // GIVEN the same weights and reserves at vLLM's 0.9 and at 0.95 of an H100
    const at = (u: number) => MemoryBudget.of({ accelerator: Accelerator.H100, gpuMemoryUtilization: u, activationReserveGib: 2 });
    // THEN the KV cache grows by 0.05 x 80 GiB, all of it
    expect(at(0.95).kvCacheBytes(16 * GIB) - at(0.9).kvCacheBytes(16 * GIB)).toBeCloseTo(4 * GIB, 0);
  });

  test.each([0, -0.1, 1.2, NaN])("rejects gpuMemoryUtilization %p naming the field and vLLM's default", value => {
    expect(() => MemoryBudget.of({ accelerator: Accelerator.H100, gpuMemoryUtilization: value }))
      .toThrow(/'gpuMemoryUtilization' \(.*\) must be greater than 0 and at most 1; vLLM's default is 0.9/);
  });

  test.each([['runtimeReserveGib', -1], ['activationReserveGib', NaN]])('rejects %s %p', (field, value) => {
    expect(() => MemoryBudget.of({ accelerator: Accelerator.H100, [field]: value }))
      .toThrow(new RegExp(`'${field}' \\(${value}\\) must be a number >= 0`));
  });

  test("vLLM's batch defaults depend on device memory, and A100 keeps the small ones", () => {
    expect(MemoryBudget.defaultBatchLimits(Accelerator.H100)).toEqual({ maxNumBatchedTokens: 8192, maxNumSeqs: 1024 });
    expect(MemoryBudget.defaultBatchLimits(Accelerator.L40S)).toEqual({ maxNumBatchedTokens: 2048, maxNumSeqs: 256 });
    expect(MemoryBudget.defaultBatchLimits(Accelerator.A100_40GB)).toEqual({ maxNumBatchedTokens: 2048, maxNumSeqs: 256 });
  });

  test('activation estimate grows with the token budget and shrinks with TP', () => {
    const model = ModelArchitecture.LLAMA_3_3_70B;
    const base = MemoryBudget.estimateActivationGib(model, 1);
    expect(MemoryBudget.estimateActivationGib(model, 8)).toBeLessThan(base);
    expect(MemoryBudget.estimateActivationGib(model, 1, { maxNumBatchedTokens: 16384 })).toBeGreaterThan(base);
    // A sanity range for a 70B model at 8192 tokens: a few GiB, not tens.
    expect(base).toBeGreaterThan(0.5);
    expect(base).toBeLessThan(5);
    expect(() => MemoryBudget.estimateActivationGib(model, 0)).toThrow(/'tensorParallel' \(0\) must be a positive integer/);
    expect(() => MemoryBudget.estimateActivationGib(model, 1, { maxNumSeqs: 1.5 })).toThrow(/'maxNumSeqs' \(1.5\)/);
  });
});
