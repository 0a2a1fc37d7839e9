import * as fs from 'fs';
import * as path from 'path';
import { AcceleratedInstanceType, ModelArchitecture, Precision } from '../catalog';
import {
  candidateLayout, CROSSOVER_TTFT_SLOS_SECONDS, CrossoverResult, pdCrossover, plan, PlanResult, plannerConfig, poolLayout,
  simulateSweep, simulationConfig, SIZING_SIMULATED_REQUESTS, SweepPoint,
} from '../engine';
import { ParallelismRules } from '../sizing';
import { CliIo, ExitCode, UsageError } from './command';
import { engineLoaded, EngineFlagValues, engineFlags, formatLatency, SchedulerFlags, wholeNumber } from './engine-flags';
import { ProgressReporter } from './progress';
import { renderSweepChart } from './svg-chart';
import { renderTable } from './table';

/** Flags `plan --simulate` adds to `plan` (besides the shared engine flags). */
export const PLAN_SIMULATE_OPTIONS = {
  'simulate': { type: 'boolean' },
  'max-accelerators': { type: 'string' },
  'modes': { type: 'string' },
  'required-rate': { type: 'string' },
  'top': { type: 'string' },
  'crossover': { type: 'string' },
} as const;

export const PLAN_SIMULATE_HELP = `Simulation-based search (--simulate; needs the engine addon, \`npx projen engine\`):
  --simulate                   search prefill/decode replica counts and TP sizes (and aggregated serving)
                               for the highest goodput per accelerator-dollar under the SLO, simulating
                               the workload; prints the ranked candidates and writes <out>/plan.svg
  --max-accelerators N         accelerators the deployment may use (default: one node; without
                               --simulate, the largest expert-parallel group of an MoE plan, default 64)
  --modes LIST                 aggregated, disaggregated or both (default aggregated,disaggregated)
  --required-rate R            goodput the deployment must reach, req/s; smaller ones rank last (default 0)
  --top N                      candidates to print (default 10)
  --crossover LIST|off         where a prefill/decode split starts to pay: the best aggregated and the best
                               split searched apart at each of these TTFT SLOs, seconds, the rest of the
                               SLO as given (default ${CROSSOVER_TTFT_SLOS_SECONDS.join(',')} and --ttft; off skips it;
                               only when both modes are searched)
  (--tp restricts the search to that size; --price-per-hour turns the score into requests per dollar;
   --rate sets the chart's rates only: the search finds each candidate's own goodput; --requests is
   what each probe simulates at least, default 400 as the constructs' sizeFor, not simulate's 1000)`;

/** Inputs `plan` resolved before the search. */
export interface PlanSearchInputs {
  readonly model: ModelArchitecture;
  readonly instanceType: AcceleratedInstanceType;
  readonly weightPrecision?: Precision;
  readonly kvCachePrecision: Precision;
  readonly maxContext: number;
  readonly tensorParallel?: number;
  readonly pricePerHour?: number;
  /** vLLM engine arguments (--max-num-seqs, --block-size, --gpu-memory-utilization, ...). */
  readonly scheduler: SchedulerFlags;
  readonly json: boolean;
}

/** `disagg plan --simulate`: the planner, its ranked candidates, and a sweep chart of the best. */
export async function runPlanSearch(values: EngineFlagValues & Record<string, unknown>, inputs: PlanSearchInputs, io: CliIo): Promise<number> {
  // Without --requests, each probe simulates what sizeFor's would (engineFlags' 1,000 is simulate's).
  const flags = engineFlags({ ...values, requests: values.requests ?? String(SIZING_SIMULATED_REQUESTS) });
  if (flags.stages) {
    throw new UsageError('--stages cannot be planned (the stages fix their own rates, and the planner searches the rate); plan with --rate, then check with `disagg simulate --stages`');
  }
  if (flags.concurrency !== undefined) {
    throw new UsageError(`--concurrency (${flags.concurrency}) cannot be planned: a closed loop fixes its own rate, and the planner searches the rate; ` +
      'plan with --rate, then check a candidate with `disagg simulate --concurrency`');
  }
  const maxAccelerators = wholeNumber('--max-accelerators', values['max-accelerators'] as string | undefined, 1) ?? inputs.instanceType.acceleratorCount;
  const top = wholeNumber('--top', values.top as string | undefined, 1) ?? 10;
  const modes = ((values.modes as string | undefined) ?? 'aggregated,disaggregated').split(',').map(s => s.trim());
  for (const m of modes) {
    if (m !== 'aggregated' && m !== 'disaggregated') {
      throw new UsageError(`--modes '${values.modes}': '${m}' is not a mode; use aggregated, disaggregated or both (comma-separated)`);
    }
  }
  const crossoverSlos = crossoverFlag(values.crossover as string | undefined, flags.slo.ttftSeconds, modes);
  const requiredText = values['required-rate'] as string | undefined;
  const required = requiredText === undefined ? 0 : Number(requiredText);
  if (!(Number.isFinite(required) && required >= 0)) {
    throw new UsageError(`--required-rate expects a number >= 0, got '${requiredText}'`);
  }
  const common = {
    model: inputs.model,
    weightPrecision: inputs.weightPrecision,
    kvCachePrecision: inputs.kvCachePrecision,
    maxContext: inputs.maxContext,
    gpuMemoryUtilization: inputs.scheduler.gpuMemoryUtilization,
    kvBlockSize: inputs.scheduler.kvBlockSize,
    maxNumSeqs: inputs.scheduler.maxNumSeqs,
    maxNumBatchedTokens: inputs.scheduler.maxNumBatchedTokens,
    asyncScheduling: inputs.scheduler.asyncScheduling,
    ...(inputs.scheduler.cpuOffloadGib !== undefined ? { kvTiers: { hostGib: inputs.scheduler.cpuOffloadGib } } : {}),
    workload: flags.workload,
    slo: flags.slo,
    policy: flags.policy,
    efficiency: { stepOverheadSeconds: flags.stepOverheadSeconds },
    seed: flags.seed,
  };
  let config;
  try {
    config = plannerConfig({
      ...common,
      instanceType: inputs.instanceType,
      tensorParallelSizes: inputs.tensorParallel !== undefined ? [inputs.tensorParallel] : undefined,
      // MoE: wide expert-parallel groups of whole nodes too, unless --tp fixes the layout.
      ...(inputs.model.isMoe && inputs.tensorParallel === undefined
        ? { expertParallelSizes: ParallelismRules.wideExpertParallelSizes(inputs.model, inputs.instanceType, maxAccelerators) } : {}),
      pricePerInstanceHour: inputs.pricePerHour,
      planner: {
        maxAccelerators,
        modes: modes as Array<'aggregated' | 'disaggregated'>,
        targetShare: flags.targetShare,
        requiredRatePerSecond: required,
      },
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (flags.engine) config = flags.engine.applyTo(config);
  if (!engineLoaded(io, 'disagg plan')) return ExitCode.INTERNAL;
  const started = Date.now();
  const progress = new ProgressReporter(io, 'planning');
  let result: PlanResult;
  try {
    result = await plan(config, p => progress.update(p.done, p.total, `${p.simulations} simulations`));
  } catch (e) {
    throw new UsageError((e as Error).message);
  } finally {
    progress.finish();
  }
  const seconds = (Date.now() - started) / 1000;
  const best = result.candidates.find(c => c.status === 'evaluated' && c.goodputRatePerSecond > 0);

  // The best candidate swept over rates around its goodput, for the chart (a trace fixes its own
  // rate and shape over time: its plan has no chart).
  let sweep: SweepPoint[] = [];
  const outDir = path.resolve(flags.outDir);
  const svgFile = path.join(outDir, 'plan.svg');
  const traced = flags.workload.kind === 'trace';
  if (best && !traced) {
    const pool = (role: string) => best.pools.find(p => p.role === role)!;
    const shape = (role: string) => ({
      replicas: pool(role).replicas,
      tensorParallel: pool(role).tensorParallel,
      ...(pool(role).acceleratorsPerReplica > pool(role).tensorParallel ? { expertParallel: pool(role).acceleratorsPerReplica } : {}),
    });
    const simConfig = simulationConfig({
      ...common,
      // The same window as each planner probe, so the chart shows what the search measured.
      workload: { ...flags.workload, requests: 0, durationSeconds: result.probeSeconds },
      instanceType: inputs.instanceType,
      ...(best.mode === 'aggregated' ? { aggregated: shape('both') } : { prefill: shape('prefill'), decode: shape('decode') }),
    });
    const rates = [0.25, 0.5, 0.75, 1, 1.25, 1.5].map(f => Number((best.goodputRatePerSecond * f).toPrecision(4)));
    const sweepProgress = new ProgressReporter(io, 'charting the best');
    try {
      sweep = await simulateSweep(simConfig, rates, p => sweepProgress.update(p.done, p.total));
    } finally {
      sweepProgress.finish();
    }
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(svgFile, renderSweepChart(sweep, {
      title: `${inputs.model.name} on ${inputs.instanceType.name}: best plan ${candidateLayout(best)}`,
      ttftSloSeconds: flags.slo.ttftSeconds,
      tpotSloSeconds: flags.slo.tpotSeconds,
      targetShare: flags.targetShare,
      markRate: best.goodputRatePerSecond,
      markLabel: 'goodput',
    }));
  }
  let crossover: CrossoverResult | undefined;
  if (crossoverSlos) {
    const crossoverProgress = new ProgressReporter(io, 'where P/D pays');
    try {
      crossover = await pdCrossover(config, crossoverSlos, p => crossoverProgress.update(p.done, p.total, `${p.simulations} simulations`));
    } finally {
      crossoverProgress.finish();
    }
  }
  if (inputs.json) {
    const chart = best && !traced ? svgFile : null;
    io.out(JSON.stringify({ searchSeconds: seconds, result, bestSweep: sweep, chart, crossover: crossover ?? null }, undefined, 2));
    return best ? ExitCode.OK : ExitCode.NEGATIVE;
  }
  const unit = inputs.pricePerHour !== undefined ? 'req/$' : 'req/acc-h';
  io.out(`disagg plan --simulate: ${inputs.model.name} on ${inputs.instanceType.name}, at most ${maxAccelerators} accelerators`);
  io.out(`  SLO: ${Math.round(flags.targetShare * 100)}% of requests within TTFT ${formatLatency(flags.slo.ttftSeconds)} and TPOT ${formatLatency(flags.slo.tpotSeconds)}; ` +
    `goodput found per candidate on a ${Math.round(result.grid.rateResolution * 100)}% rate grid, ${result.probeSeconds} s of arrivals per probe`);
  if (result.trace) {
    io.out(`  trace: ${result.trace.records.toLocaleString('en-US')} records at ${result.trace.ratePerSecond.toFixed(2)} req/s; ` +
      'each probe replays it sped up or slowed down to the probe\'s rate (its first probe window, at least 1,000 records), ' +
      'and every candidate must carry the trace\'s own rate');
  }
  io.out('');
  const shown = result.candidates.filter(c => c.status === 'evaluated').slice(0, top);
  const headers = ['rank', 'mode', 'prefill', 'decode', 'accelerators', 'goodput/s', 'TTFT p90', 'TPOT p90', unit, ''];
  const rows = shown.map(c => [
    String(c.rank),
    c.mode,
    c.mode === 'aggregated' ? '-' : poolLayout(c, 'prefill'),
    c.mode === 'aggregated' ? poolLayout(c, 'both') : poolLayout(c, 'decode'),
    String(c.accelerators),
    c.goodputRatePerSecond.toFixed(2) + (c.capped ? '+' : ''),
    c.summary ? formatLatency(c.summary.ttftSeconds.p90) : '-',
    c.summary ? formatLatency(c.summary.tpotSeconds.p90) : '-',
    Math.round(c.score).toLocaleString('en-US'),
    c.meetsRequiredRate ? '' : result.trace ? "below the trace's rate" : 'below --required-rate',
  ]);
  io.out(renderTable(headers, rows, [true, false, false, false, true, true, true, true, true, false]).join('\n'));
  io.out('');
  io.out(`${result.total} candidates: ${result.evaluated} simulated to the end, ${result.pruned} pruned (could not enter the top ${3}), ` +
    `${result.infeasible} infeasible; ${result.simulations} simulations in ${seconds.toFixed(1)} s.` +
    (shown.some(c => c.capped) ? ' "+": still met the SLO at the search cap (1.5 x the roofline bound).' : ''));
  if (best) {
    const chart = traced ? '' : `; chart of it by rate: ${rel(svgFile)}`;
    const headroom = result.trace ? ` (${(best.goodputRatePerSecond / result.trace.ratePerSecond).toFixed(1)} x the trace's rate)` : '';
    io.out(`Best: ${candidateLayout(best)}, goodput ${best.goodputRatePerSecond.toFixed(2)} req/s${headroom} on ${best.accelerators} accelerators${chart}`);
  } else {
    io.out('No candidate meets the SLO at any rate: loosen --ttft/--tpot, shorten prompts or outputs, or allow more accelerators.');
  }
  if (crossover) printCrossover(io, crossover, unit, flags.slo.ttftSeconds);
  return best ? ExitCode.OK : ExitCode.NEGATIVE;
}

/**
 * The TTFT SLOs `--crossover` asks for: off, a list, or the default grid with the SLO of the search
 * itself. Null when it is off or only one mode is searched (nothing to compare).
 */
function crossoverFlag(text: string | undefined, ttftSeconds: number, modes: string[]): number[] | null {
  if (text === 'off') return null;
  if (text === undefined) return modes.length === 2 ? [...CROSSOVER_TTFT_SLOS_SECONDS, ttftSeconds] : null;
  const slos = text.split(',').map(s => s.trim());
  for (const s of slos) {
    if (!(Number(s) > 0 && Number.isFinite(Number(s)))) {
      throw new UsageError(`--crossover '${text}': '${s}' is not a TTFT SLO in seconds; give a comma-separated list of positive seconds (0.25,1,4) or off`);
    }
  }
  if (modes.length !== 2) {
    throw new UsageError(`--crossover compares aggregated serving with a prefill/decode split, but --modes is '${modes.join(',')}'; search both modes, or drop --crossover`);
  }
  return slos.map(Number);
}

function printCrossover(io: CliIo, c: CrossoverResult, unit: string, searchTtft: number): void {
  io.out('');
  io.out(`Where a prefill/decode split pays: the best of each mode at each TTFT SLO (TPOT ${c.tpotSeconds !== undefined ? formatLatency(c.tpotSeconds) : 'as given'}), ` +
    `ratio of ${unit} (within 5% is a tie)`);
  const best = (b: CrossoverResult['rows'][number]['aggregated']) => b ? `${b.layout.replace(/^aggregated /, '')}` : 'none meets it';
  const rows = c.rows.map(r => [
    formatLatency(r.ttftSeconds) + (r.ttftSeconds === searchTtft ? ' *' : ''),
    best(r.aggregated),
    r.aggregated ? Math.round(r.aggregated.score).toLocaleString('en-US') : '-',
    best(r.disaggregated),
    r.disaggregated ? Math.round(r.disaggregated.score).toLocaleString('en-US') : '-',
    r.ratio !== null ? r.ratio.toFixed(2) : '-',
    r.winner === 'disaggregated' ? 'P/D' : r.winner,
  ]);
  io.out(renderTable(['TTFT SLO', 'best aggregated', unit, 'best P/D', unit, 'P/D : agg', 'pays'], rows,
    [true, false, true, false, true, true, false]).join('\n'));
  io.out(`(* the search above.) Verdict: ${c.verdict}.`);
}


function rel(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative && !relative.startsWith('..') ? relative : file;
}
