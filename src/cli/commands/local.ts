import * as fs from 'fs';
import * as path from 'path';
import { CliIo, Command, ExitCode, UsageError, parseOptions } from '../command';
import { DEFAULT_DEPLOYMENT } from '../defaults';
import { runAutoscale } from '../local/autoscale-cli';
import {
  EXPERT_PARALLEL_DEPLOYMENT, expertParallelRanksProblem, LocalDeployment, localDeployment, localExpertParallelDeployment, LocalPool,
  LocalPrefixSource, RankEndpoint, rankEndpoints, routerConfigFor, workerConfig,
} from '../local/deployment';
import { formatBreakdown, PhaseBreakdown, phaseBreakdowns } from '../local/phases';
import { consecutiveFreePorts, EngineProcess, freePort, ProcessGroup, resolveEngineBinary, waitFor200, withProcessGroup } from '../local/processes';
import { scrapeTargetsOf } from '../local/scrape-targets';
import { buildJobs, Job, percentile, RequestApi, runJobs, TEXT_CHARS_PER_TOKEN, WorkloadSpec } from '../local/workload';
import { ProgressReporter } from '../progress';
import { renderTable } from '../table';
import { CliVocabulary } from '../vocabulary';

const HELP = `Usage: disagg local [options]

Runs the default deployment (${DEFAULT_DEPLOYMENT.model}, TP${DEFAULT_DEPLOYMENT.tensorParallel} on ${DEFAULT_DEPLOYMENT.instance}) on this machine: \`disagg-engine
router\` in front of \`disagg-engine sim-worker\` processes (vLLM stand-ins whose step times come from the
engine's cost model for that model and instance), all on 127.0.0.1. The router reads the configuration
the DisaggregatedInference construct writes into its ConfigMap, with the local workers as a static
endpoint list. It sends a workload of tenants sharing long system prompts and multi-turn chats
(streamed chat completions, or completions with --api), prints a live progress line and a summary: TTFT / TPOT percentiles,
throughput and prefix-cache hit rate, under the deployment's policy and under round robin (every run
starts fresh processes, so caches start cold). Everything it started is stopped at the end, on an error
and on Ctrl-C. Needs the engine binary (\`npx projen engine\`).

Deployment:
  --replicas N             aggregated sim-workers (default ${DEFAULT_DEPLOYMENT.prefillReplicas + DEFAULT_DEPLOYMENT.decodeReplicas})
  --prefill-replicas N     run P/D instead: N prefill sim-workers (with --decode-replicas)
  --decode-replicas M      M decode sim-workers (with --prefill-replicas)
  --expert-parallel        run the wide expert-parallel P/D shape instead: ${EXPERT_PARALLEL_DEPLOYMENT.model.name} ${EXPERT_PARALLEL_DEPLOYMENT.weights.name.toUpperCase()} on
                           ${EXPERT_PARALLEL_DEPLOYMENT.instanceType.name} as DisaggregatedInference with ExpertParallelPool sides and
                           per-rank endpoints: one sim-worker per data-parallel rank, grouped into pods
                           (a block of consecutive ports each, KV events on the pod's base + local rank,
                           ranks as vLLM numbers them), routed per rank; prints each rank's load.
                           --prefill-replicas / --decode-replicas then count groups (LeaderWorkerSet
                           replicas; default 1)
  --prefill-ranks N        data-parallel ranks of a prefill group (ExpertParallelPool dataParallel;
                           default 2): up to ${EXPERT_PARALLEL_DEPLOYMENT.instanceType.acceleratorCount} share one node (tensor parallel ${EXPERT_PARALLEL_DEPLOYMENT.instanceType.acceleratorCount} / N), beyond
                           whole nodes, one pod each
  --decode-ranks N         data-parallel ranks of a decode group (default 4)
  --policy NAME            policy under test (default: the deployment's, kv-aware = llm-d); also
                           least-load, llm-d, sglang, dynamo, disagg
  --baseline NAME          policy to compare with (default round-robin; none = skip)
  --prefix-source S        where the policy finds cached prefixes: index (the KV-event index the
                           sim-workers feed: precise; default), history (the router's own record of what
                           it routed: approximate), or index,history (a run with each, then the baseline
                           with the first)
  --speedup X              model seconds per wall second of the sim-workers (default 1)
  --kv-tokens N            KV cache tokens per sim-worker (default: what sizing leaves a replica of its
                           pool, millions); fewer make a short run fill the caches and evict
Autoscaling (--autoscale: the issue 24 rule on loopback, P/D, under a load that rises and falls):
  --autoscale              scale the prefill and decode pools on the router's SLO pressure (GET
                           /scaling) with the engine's rule and the construct's bounds and windows, as
                           KEDA does: a scale-up starts a sim-worker in a free slot of the pool's
                           port block (the router discovers it), a scale-down SIGTERMs the newest,
                           which drains (new requests go elsewhere, those in flight finish); prints
                           each step, each drain and the requests that failed (the goal: none).
                           --prefill-replicas / --decode-replicas: replicas at the start (default
                           --min-replicas)
  --min-replicas N         fewest replicas per pool (default 1)
  --max-replicas N         most replicas per pool (default 4)
  --duration SECONDS       length of the load (default 90): from 0.1x --rate up to --rate at the
                           middle and back down (open-loop arrivals)
  --rate R                 requests per second at the peak (default 6)
  --interval SECONDS       between two evaluations of the rule (default 1; KEDA polls every 15)
  --scale-down-window S    scale-down stabilization, whole seconds (default 10; the cluster's 300)
  --provision-seconds S    a new replica's wait before its process starts (default 2; a node start
                           and a model load take minutes in the cluster: \`disagg simulate --autoscale\`)
  --max-num-seqs N         running sequences per decode sim-worker, which the router's decode
                           pressure counts against (default 8: a small batch, so that a load this
                           machine can send fills it)
  --ttft SECONDS           time-to-first-token target (the constructs' slo.ttftSeconds; default 2)
  --tpot SECONDS           time-per-output-token target (slo.tpotSeconds; default 0.05)
  The defaults differ here: --speedup 0.25 (slower sim-workers fill at a request rate one client
  process sends), --workload shared-prefix --tenants 400 --system-tokens 1500 (mostly distinct long
  prompts, so that the prefill pool has work to scale on too)

Workload:
  --workload KIND          mixed | shared-prefix | chat (default mixed)
  --requests N             requests per run (default 200)
  --concurrency N          clients sending at once (default 16)
  --tenants N              tenants, each with its own system prompt (default 8)
  --system-tokens N        tokens of a system prompt (default 2048)
  --turns N                turns of a chat session (default 4)
  --max-tokens N           output tokens per request (default 64)
  --api API                chat: streamed chat completions, to which the sim-workers' chat template
                           adds role-header tokens (default); completions: streamed completions of the
                           messages' text joined by spaces, exactly its tokens (as inference-perf sends;
                           matches \`disagg simulate --api completions\`)
  --timeout SECONDS        longest run per policy (default 120)
  --seed N                 workload seed (default 1)
  --text FILE              cut the prompts from this real text (prose, code; repeatable, files joined by
                           a blank line) at about ${TEXT_CHARS_PER_TOKEN} characters a token, so --tokenizer's merges apply as
                           to users' prompts (default: made-up words of 2-4 letters)
Output:
  --engine PATH            disagg-engine binary (default $DISAGG_ENGINE_BIN, else engine/build/disagg-engine)
  --tokenizer DIR          a model's tokenizer.json + tokenizer_config.json: the router and the sim-workers
                           tokenize and render chat with them as vLLM does (prefixes matched on real token
                           ids); prompt lengths are then the real tokenizer's (default: a made-up tokenizer)
  --scrape-targets FILE    keep FILE a Prometheus file_sd target list of the run's router and sim-workers,
                           labelled as the constructs' PodMonitor and ServiceMonitor label a deployment
                           (deployment, namespace, pool): a Prometheus whose file_sd_configs reads it
                           scrapes the run, and Monitoring.prometheusOperator()'s dashboards and alerts
                           read it as they read the cluster (docs/monitoring.md)
  --json                   print machine-readable JSON only
  -h, --help               show this help

Exit codes: 0 every request succeeded (with --autoscale: and every drained sim-worker exited 0), 1
some failed, 2 usage error, 3 engine binary or addon missing or a process failed to start.`;

/** The flags of `disagg local`, as its parser reads them (tests parse the README's commands with them). */
const OPTIONS = {
  'replicas': { type: 'string' },
  'prefill-replicas': { type: 'string' },
  'decode-replicas': { type: 'string' },
  'expert-parallel': { type: 'boolean' },
  'prefill-ranks': { type: 'string' },
  'decode-ranks': { type: 'string' },
  'policy': { type: 'string' },
  'baseline': { type: 'string' },
  'speedup': { type: 'string' },
  'kv-tokens': { type: 'string' },
  'workload': { type: 'string' },
  'requests': { type: 'string' },
  'concurrency': { type: 'string' },
  'tenants': { type: 'string' },
  'system-tokens': { type: 'string' },
  'turns': { type: 'string' },
  'max-tokens': { type: 'string' },
  'api': { type: 'string' },
  'timeout': { type: 'string' },
  'seed': { type: 'string' },
  'prefix-source': { type: 'string' },
  'text': { type: 'string', multiple: true },
  'engine': { type: 'string' },
  'tokenizer': { type: 'string' },
  'scrape-targets': { type: 'string' },
  'json': { type: 'boolean' },
  'help': { type: 'boolean', short: 'h' },
  'autoscale': { type: 'boolean' },
  'min-replicas': { type: 'string' },
  'max-replicas': { type: 'string' },
  'duration': { type: 'string' },
  'rate': { type: 'string' },
  'interval': { type: 'string' },
  'scale-down-window': { type: 'string' },
  'provision-seconds': { type: 'string' },
  'max-num-seqs': { type: 'string' },
  'ttft': { type: 'string' },
  'tpot': { type: 'string' },
} as const;

/** `disagg local`: the default deployment on loopback with sim-workers, policy vs round robin. */
export const command: Command = {
  name: 'local',
  options: OPTIONS,
  summary: 'Run the default deployment locally (router + sim-workers) under a workload; compare with round robin',
  help: HELP,
  vocabulary: CliVocabulary.LOCAL,
  run: runLocal,
};

const POLICIES = ['round-robin', 'least-load', 'llm-d', 'sglang', 'dynamo', 'disagg', 'kv-aware', 'least-loaded'];

function whole(flag: string, text: string | undefined, min: number, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text.trim()) || Number(text) < min) {
    throw new UsageError(`${flag} expects a whole number >= ${min}, got '${text}'`);
  }
  return Number(text);
}

function positiveNumber(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n <= 0) throw new UsageError(`${flag} expects a positive number, got '${text}'`);
  return n;
}

function policyFlag(flag: string, text: string): string {
  if (!POLICIES.includes(text)) throw new UsageError(`${flag} '${text}' is not a routing policy; use one of ${POLICIES.join(', ')}`);
  return text;
}

const PREFIX_SOURCES: readonly string[] = ['index', 'history'];

/** --prefix-source: 'index', 'history' or a comma-separated list of them (one run each). */
function prefixSources(text: string | undefined): LocalPrefixSource[] {
  if (text === undefined) return ['index'];
  const list = text.split(',').map(s => s.trim());
  const bad = list.find(s => !PREFIX_SOURCES.includes(s));
  if (bad !== undefined) {
    throw new UsageError(`--prefix-source '${text}': '${bad}' is not a prefix source; use index (precise: the KV-event index), ` +
      'history (approximate: the router\'s routing history) or index,history (a run with each)');
  }
  if (new Set(list).size !== list.length) throw new UsageError(`--prefix-source '${text}' names a source twice; use index,history for a run with each`);
  return list as LocalPrefixSource[];
}

/** --text FILE...: the files' text, joined by a blank line. */
function readText(files: string[]): string {
  const parts = files.map(f => {
    let text: string;
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch (e) {
      throw new UsageError(`--text '${f}' cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); give a text file of prose or code, e.g. README.md`);
    }
    if (text.trim() === '') throw new UsageError(`--text '${f}' has no text; give a text file of prose or code, e.g. README.md`);
    return text;
  });
  return parts.join('\n\n');
}

/** Summary of one run. */
interface RunSummary {
  readonly policy: string;
  /** The run's name in the table: the policy, with its prefix source when --prefix-source was given. */
  readonly label: string;
  /**
   * Where the router's prefix-aware policies found cached prefixes (its
   * disagg_router_prefix_source_info): round-robin and least-load do not look, sglang keeps its own tree.
   */
  readonly prefixSource: string;
  readonly requests: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly timedOut: boolean;
  readonly seconds: number;
  readonly requestsPerSecond: number;
  readonly outputTokensPerSecond: number;
  readonly ttftSeconds: { p50: number; p90: number; p99: number };
  readonly tpotSeconds: { p50: number; p90: number; p99: number };
  /** Prompt tokens served from the workers' prefix caches / prompt tokens (vllm:prefix_cache_*). */
  readonly prefixHitRate: number;
  /** Requests per endpoint (X-Disagg-Endpoint): the decode or aggregated endpoint that answered. */
  readonly endpoints: Record<string, number>;
  /** Prefill legs per prefill endpoint (X-Disagg-Prefill-Endpoint); empty in an aggregated run. */
  readonly prefillEndpoints: Record<string, number>;
  /** Mean router overhead before the upstream request (disagg_router_overhead_seconds). */
  readonly routerOverheadSeconds: number;
  /** Where a request's time went, per path (the router's phase histograms): the means add up to TTFT and E2E. */
  readonly phases: PhaseBreakdown[];
  /** Each data-parallel rank's load (--expert-parallel). */
  readonly ranks?: RankLoad[];
  /** Ranks that served no request (--expert-parallel). */
  readonly idleRanks?: string[];
  readonly firstError?: string;
}

/** A router endpoint of the static list (a sim-worker, or a rank of one). */
type StaticEndpointOf = Parameters<typeof routerConfigFor>[1][number];

/** The sim-worker of one data-parallel rank. */
interface RankWorker {
  readonly pool: LocalPool;
  readonly group: number;
  readonly pod: number;
  readonly endpoint: RankEndpoint;
  readonly worker: EngineProcess;
}

/** What one data-parallel rank served in a run, from its sim-worker's counters and the router's. */
interface RankLoad {
  /** e.g. 'decode-g0-pod0-rank3'. */
  readonly name: string;
  readonly pool: string;
  readonly group: number;
  readonly pod: number;
  readonly rank: number;
  /** host:port, the router's label. */
  readonly endpoint: string;
  /** Requests it finished: whole requests, prefill legs or decode legs (vllm:request_success_total). */
  readonly requests: number;
  /** Prompt tokens it was given (vllm:prompt_tokens_total). */
  readonly promptTokens: number;
  /** Of them, tokens found in its prefix cache (vllm:prefix_cache_hits_total). */
  readonly cachedTokens: number;
  /**
   * KV transfers: on a decode rank the prefills it pulled (disagg:sim_worker_kv_pulls_total), on a
   * prefill rank the prefill legs it served for a decode rank to pull.
   */
  readonly kvTransfers: number;
  /** Legs the router sent to it (disagg_router_endpoint_requests_total). */
  readonly routedLegs: number;
  /** The rank the router reports for it (configured, else from its KV events); -1 when absent. */
  readonly routerRank: number;
}

/** Samples of `metric` by the value of their `label` label. */
function samplesBy(page: string, metric: string, label: string): Map<string, number> {
  const out = new Map<string, number>();
  const re = new RegExp(`^${metric}\\{([^}]*)\\}\\s+(\\S+)`, 'gm');
  for (const m of page.matchAll(re)) {
    const key = new RegExp(`\\b${label}="([^"]*)"`).exec(m[1])?.[1];
    if (key !== undefined) out.set(key, (out.get(key) ?? 0) + Number(m[2]));
  }
  return out;
}

/** Each rank's load after a run (fresh processes: their counters are this run's). */
async function rankLoad(ranks: RankWorker[], routerPage: string): Promise<RankLoad[]> {
  const legs = samplesBy(routerPage, 'disagg_router_endpoint_requests_total', 'endpoint');
  const routerRanks = samplesBy(routerPage, 'disagg_router_endpoint_data_parallel_rank', 'endpoint');
  const out: RankLoad[] = [];
  for (const r of ranks) {
    const m = await scrape(r.worker.url);
    const endpoint = `127.0.0.1:${r.endpoint.port}`;
    const requests = m.get('vllm:request_success_total') ?? 0;
    out.push({
      name: r.worker.name,
      pool: r.pool.name,
      group: r.group,
      pod: r.pod,
      rank: r.endpoint.dataParallelRank,
      endpoint,
      requests,
      promptTokens: m.get('vllm:prompt_tokens_total') ?? 0,
      cachedTokens: m.get('vllm:prefix_cache_hits_total') ?? 0,
      kvTransfers: r.pool.role === 'decode' ? m.get('disagg:sim_worker_kv_pulls_total') ?? 0 : requests,
      routedLegs: legs.get(endpoint) ?? 0,
      routerRank: routerRanks.get(endpoint) ?? -1,
    });
  }
  return out;
}

/** Sums every sample of each metric family in a Prometheus text page (labels ignored). */
function metricTotals(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3]);
    if (Number.isFinite(v)) out.set(m[1], (out.get(m[1]) ?? 0) + v);
  }
  return out;
}

/** A process's /metrics page ('' when it does not answer). */
async function metricsPage(url: string): Promise<string> {
  try {
    const r = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) });
    return await r.text();
  } catch {
    return '';
  }
}

async function scrape(url: string): Promise<Map<string, number>> {
  return metricTotals(await metricsPage(url));
}

const pct = (v: number[]) => ({ p50: percentile(v, 50), p90: percentile(v, 90), p99: percentile(v, 99) });

interface RunOptions {
  readonly deployment: LocalDeployment;
  /** KV cache tokens per sim-worker (--kv-tokens), else the pool's. */
  readonly kvTokens?: number;
  readonly speedup: number;
  readonly jobs: Job[];
  readonly workload: WorkloadSpec;
  readonly concurrency: number;
  readonly api: RequestApi;
  readonly timeoutMs: number;
  readonly tmp: string;
  /** A folder with the model's tokenizer files, for real token ids (--tokenizer). */
  readonly tokenizer?: string;
  /** Set on Ctrl-C: the progress line stops (requests now fail as the processes drain). */
  readonly interrupted: { value: boolean };
}

/** One run: a policy with a prefix source, and how the summary names it. */
interface RunPlan {
  readonly policy: string;
  readonly prefixSource: LocalPrefixSource;
  /** The policy, with its prefix source when --prefix-source was given, e.g. 'kv-aware (history)'. */
  readonly label: string;
}

/** Starts fresh sim-workers and a router with the plan's policy, runs the jobs, stops everything. */
async function runPolicy(group: ProcessGroup, plan: RunPlan, o: RunOptions, io: CliIo, json: boolean): Promise<RunSummary> {
  const { policy, label } = plan;
  const d = o.deployment;
  try {
    const workers: EngineProcess[] = [];
    const endpoints: StaticEndpointOf[] = [];
    const ranks: RankWorker[] = [];
    let index = 0;
    for (const pool of d.pools) {
      const file = path.join(o.tmp, `worker-${pool.name}.json`);
      fs.writeFileSync(file, JSON.stringify(workerConfig(pool), undefined, 2));
      // An expert-parallel group's KV cache and sequences are split over its ranks.
      const perWorker = pool.ranks ? pool.ranks.ranksPerGroup : 1;
      const workerArgs = (seed: number) => {
        const args = ['sim-worker', '--config', file, '--host', '127.0.0.1',
          '--role', pool.role === 'both' ? 'aggregated' : pool.role,
          '--model-name', d.servedModelName,
          '--block-size', String(d.kvBlockSize),
          '--kv-blocks', String(Math.max(1, Math.floor((o.kvTokens ?? pool.kvTokensPerReplica / perWorker) / d.kvBlockSize))),
          '--speedup', String(o.speedup),
          '--seed', String(seed)];
        const seqs = Math.floor(pool.maxConcurrencyPerReplica / perWorker);
        if (seqs > 0) args.push('--max-num-seqs', String(seqs));
        if (o.tokenizer) args.push('--tokenizer', o.tokenizer);
        return args;
      };
      if (pool.ranks) {
        // One sim-worker per rank, pod by pod: the pod's per-rank ports as a block, as the router's
        // configuration lists them (rankEndpoints).
        const r = pool.ranks;
        for (let g = 0; g < r.groups; g++) {
          for (let pod = 0; pod < r.podsPerGroup; pod++) {
            const span = r.httpPorts[r.httpPorts.length - 1] - r.httpPorts[0] + 1;
            const eps = rankEndpoints(pool, await consecutiveFreePorts(span), await consecutiveFreePorts(r.ranksPerPod), pod);
            for (const e of eps) {
              const name = `${pool.name}-g${g}-pod${pod}-rank${e.dataParallelRank}`;
              const w = await group.start(name, [...workerArgs(++index), '--port', String(e.port),
                '--kv-events-port', String(e.kvEventsConfiguredPort), '--data-parallel-rank', String(e.dataParallelRank)]);
              workers.push(w);
              endpoints.push(e);
              ranks.push({ pool, group: g, pod, endpoint: e, worker: w });
            }
          }
        }
        continue;
      }
      for (let r = 0; r < pool.replicas; r++) {
        const kvPort = await freePort();
        const w = await group.start(`${pool.name}-${r}`, [...workerArgs(++index), '--port', '0', '--kv-events-port', String(kvPort)]);
        workers.push(w);
        endpoints.push({ pool: pool.name, url: w.url, kvEventsEndpoint: `tcp://127.0.0.1:${kvPort}` });
      }
    }
    const routerFile = path.join(o.tmp, 'router.json');
    fs.writeFileSync(routerFile, JSON.stringify(routerConfigFor(d, endpoints, plan.prefixSource), undefined, 2));
    const router = await group.start('router', ['router', '--config', routerFile, '--host', '127.0.0.1', '--port', '0',
      '--policy', policy, '--health-interval-ms', '200', ...(o.tokenizer ? ['--tokenizer', o.tokenizer] : [])]);
    await waitFor200(`${router.url}/ready`, 15_000);

    const progress = new ProgressReporter(json ? { out: () => undefined, err: () => undefined } : io, `local ${label.padEnd(11)}`);
    let lastDraw = 0;
    const result = await runJobs(router.url, d.servedModelName, o.jobs, {
      concurrency: o.concurrency,
      api: o.api,
      maxTokens: o.workload.maxTokens,
      timeoutMs: o.timeoutMs,
      onProgress: p => {
        if (o.interrupted.value) return;
        const now = Date.now();
        if (now - lastDraw < 100 && p.done < p.total) return;
        lastDraw = now;
        const ttft = percentile(p.samples.filter(s => s.ok).map(s => s.ttft), 50);
        progress.update(p.done, p.total, `TTFT p50 ${fmt(ttft)}${p.failed ? `  ${p.failed} failed` : ''}`);
      },
    });
    progress.finish();

    // Prefix hits from the workers' own counters (fresh processes: the totals are this run's).
    let hits = 0;
    let queries = 0;
    for (const w of workers) {
      const m = await scrape(w.url);
      hits += m.get('vllm:prefix_cache_hits_total') ?? 0;
      queries += m.get('vllm:prefix_cache_queries_total') ?? 0;
    }
    const routerPage = await metricsPage(router.url);
    const rm = metricTotals(routerPage);
    const source = /^disagg_router_prefix_source_info\{[^}]*\bsource="(\w+)"/m.exec(routerPage)?.[1];
    const ok = result.samples.filter(s => s.ok);
    const endpointCounts: Record<string, number> = {};
    const prefillCounts: Record<string, number> = {};
    for (const s of ok) {
      endpointCounts[s.endpoint] = (endpointCounts[s.endpoint] ?? 0) + 1;
      if (s.prefillEndpoint) prefillCounts[s.prefillEndpoint] = (prefillCounts[s.prefillEndpoint] ?? 0) + 1;
    }
    const rankLoads = ranks.length > 0 ? await rankLoad(ranks, routerPage) : undefined;
    const outputTokens = ok.reduce((n, s) => n + s.outputTokens, 0);
    const overheadCount = rm.get('disagg_router_overhead_seconds_count') ?? 0;
    const firstError = result.samples.find(s => !s.ok)?.error;
    return {
      policy,
      label,
      prefixSource: source ?? plan.prefixSource,
      requests: result.samples.length,
      succeeded: ok.length,
      failed: result.samples.length - ok.length,
      timedOut: result.timedOut,
      seconds: result.seconds,
      requestsPerSecond: ok.length / result.seconds,
      outputTokensPerSecond: outputTokens / result.seconds,
      ttftSeconds: pct(ok.map(s => s.ttft)),
      tpotSeconds: pct(ok.map(s => s.tpot)),
      prefixHitRate: queries > 0 ? hits / queries : 0,
      endpoints: endpointCounts,
      prefillEndpoints: prefillCounts,
      routerOverheadSeconds: overheadCount > 0 ? (rm.get('disagg_router_overhead_seconds_sum') ?? 0) / overheadCount : NaN,
      phases: phaseBreakdowns(routerPage),
      ...(rankLoads ? { ranks: rankLoads, idleRanks: rankLoads.filter(r => r.requests === 0).map(r => r.name) } : {}),
      ...(firstError ? { firstError } : {}),
    };
  } finally {
    await group.stopAll();
  }
}

function fmt(seconds: number): string {
  if (!Number.isFinite(seconds)) return '-';
  if (seconds < 1) return `${(seconds * 1000).toPrecision(3)} ms`;
  return `${seconds.toPrecision(3)} s`;
}

function ratio(a: number, b: number): string {
  return Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}x` : '-';
}

async function runLocal(argv: string[], io: CliIo): Promise<number> {
  const values = parseOptions(argv, OPTIONS, io);
  if (values.help) {
    io.out(HELP);
    return ExitCode.OK;
  }
  const autoscaleOnly = ['min-replicas', 'max-replicas', 'duration', 'rate', 'interval', 'scale-down-window', 'provision-seconds',
    'max-num-seqs', 'ttft', 'tpot'] as const;
  if (values.autoscale === true) return runAutoscale(values, io, readText);
  const stray = autoscaleOnly.find(f => values[f] !== undefined);
  if (stray) throw new UsageError(`--${stray} is a flag of an autoscaled run; add --autoscale`);
  const expertParallel = values['expert-parallel'] === true;
  if (!expertParallel && (values['prefill-replicas'] === undefined) !== (values['decode-replicas'] === undefined)) {
    throw new UsageError('--prefill-replicas and --decode-replicas go together, e.g. --prefill-replicas 2 --decode-replicas 2');
  }
  if (values.replicas !== undefined && (values['prefill-replicas'] !== undefined || expertParallel)) {
    throw new UsageError(`--replicas is for an aggregated run; with ${expertParallel ? '--expert-parallel' : '--prefill-replicas/--decode-replicas'} leave it out`);
  }
  if (!expertParallel && (values['prefill-ranks'] !== undefined || values['decode-ranks'] !== undefined)) {
    throw new UsageError('--prefill-ranks and --decode-ranks size the groups of --expert-parallel; add --expert-parallel');
  }
  const pd = values['prefill-replicas'] !== undefined || expertParallel
    ? { prefill: whole('--prefill-replicas', values['prefill-replicas'], 1, 1), decode: whole('--decode-replicas', values['decode-replicas'], 1, 1) }
    : undefined;
  const ep = expertParallel ? {
    prefillRanks: whole('--prefill-ranks', values['prefill-ranks'], 1, 2),
    decodeRanks: whole('--decode-ranks', values['decode-ranks'], 1, 4),
    prefillGroups: pd!.prefill,
    decodeGroups: pd!.decode,
  } : undefined;
  for (const [flag, ranks] of ep ? [['--prefill-ranks', ep.prefillRanks], ['--decode-ranks', ep.decodeRanks]] as const : []) {
    const problem = expertParallelRanksProblem(ranks);
    if (problem) throw new UsageError(`${flag} ${ranks}: ${problem}`);
  }
  const workers = whole('--replicas', values.replicas, 1, DEFAULT_DEPLOYMENT.prefillReplicas + DEFAULT_DEPLOYMENT.decodeReplicas);
  const processes = ep ? ep.prefillRanks * ep.prefillGroups + ep.decodeRanks * ep.decodeGroups : pd ? pd.prefill + pd.decode : workers;
  if (processes > 32) {
    throw new UsageError(`at most 32 sim-workers run locally; got ${processes}` +
      (ep ? ` (${ep.prefillGroups} x ${ep.prefillRanks} prefill + ${ep.decodeGroups} x ${ep.decodeRanks} decode ranks)` : ''));
  }
  const kind = values.workload ?? 'mixed';
  if (kind !== 'mixed' && kind !== 'shared-prefix' && kind !== 'chat') {
    throw new UsageError(`--workload '${kind}' is not a workload; use mixed, shared-prefix or chat`);
  }
  const workload: WorkloadSpec = {
    kind,
    requests: whole('--requests', values.requests, 1, 200),
    tenants: whole('--tenants', values.tenants, 1, 8),
    systemTokens: whole('--system-tokens', values['system-tokens'], 4, 2048),
    questionTokens: 128,
    turns: whole('--turns', values.turns, 1, 4),
    turnTokens: 128,
    maxTokens: whole('--max-tokens', values['max-tokens'], 1, 64),
    seed: whole('--seed', values.seed, 0, 1),
    ...(values.text ? { text: readText(values.text) } : {}),
  };
  if (workload.requests > 100_000) throw new UsageError(`--requests ${workload.requests} is over the local limit of 100000`);
  const concurrency = whole('--concurrency', values.concurrency, 1, 16);
  const api = values.api ?? 'chat';
  if (api !== 'chat' && api !== 'completions') {
    throw new UsageError(`--api '${api}' is not an API; use chat (/v1/chat/completions, the default) or completions (/v1/completions)`);
  }
  const speedup = positiveNumber('--speedup', values.speedup, 1);
  const kvTokens = values['kv-tokens'] === undefined ? undefined : whole('--kv-tokens', values['kv-tokens'], 1024, 0);
  const timeoutMs = positiveNumber('--timeout', values.timeout, 120) * 1000;
  const baseline = values.baseline === 'none' ? undefined : policyFlag('--baseline', values.baseline ?? 'round-robin');
  const sources = prefixSources(values['prefix-source']);
  const json = values.json === true;
  const tokenizer = values.tokenizer === undefined ? undefined : path.resolve(values.tokenizer);
  if (tokenizer !== undefined && !fs.existsSync(path.join(tokenizer, 'tokenizer.json'))) {
    throw new UsageError(`--tokenizer '${values.tokenizer}' has no tokenizer.json; give the folder of a model's tokenizer.json and tokenizer_config.json`);
  }

  let binary: string;
  try {
    binary = resolveEngineBinary(values.engine);
  } catch (e) {
    io.err(`disagg local: ${(e as Error).message}`);
    return ExitCode.INTERNAL;
  }
  const deployment = ep ? localExpertParallelDeployment(ep) : localDeployment(pd, workers);
  const policy = policyFlag('--policy', values.policy ?? deployment.policy);
  const named = values['prefix-source'] !== undefined;
  const plans: RunPlan[] = sources.map(s => ({ policy, prefixSource: s, label: named ? `${policy} (${s})` : policy }));
  if (baseline && baseline !== policy) plans.push({ policy: baseline, prefixSource: sources[0], label: baseline });
  const jobs = buildJobs(workload);
  const rankShape = (p: LocalPool) => `${p.ranks!.groups} ${p.name} group(s) x ${p.ranks!.podsPerGroup} pod(s) x ${p.ranks!.ranksPerPod} ranks`;
  const shape = (ep ? `${deployment.pools.map(rankShape).join(' + ')}, one sim-worker per rank`
    : pd ? `${pd.prefill} prefill + ${pd.decode} decode sim-workers` : `${workers} aggregated sim-workers`) +
    (kvTokens !== undefined ? ` of ${kvTokens} KV tokens` : '');
  const workloadText = `${workload.requests} requests (${kind}: ${workload.tenants} tenants x ${workload.systemTokens}-token system prompts` +
    `${kind !== 'shared-prefix' ? `, ${workload.turns}-turn chats` : ''}), ${workload.maxTokens} output tokens, concurrency ${concurrency}, ${api} API` +
    `${values.text ? `, text from ${values.text.join(', ')}` : ''}`;
  if (!json) {
    io.err(`disagg local: ${deployment.servedModelName} (${deployment.description}), ${shape}, speedup ${speedup}`);
    io.err(`  workload: ${workloadText}`);
  }
  const runs: RunSummary[] = [];
  let pids: Array<{ name: string; pid: number }> = [];
  try {
    await withProcessGroup(binary, io, async ({ group, tmp, interrupted }) => {
      pids = group.pids;
      for (const plan of plans) {
        const options: RunOptions = { deployment, kvTokens, speedup, jobs, workload, concurrency, api, timeoutMs, tmp, tokenizer, interrupted };
        runs.push(await runPolicy(group, plan, options, io, json));
      }
    }, scrapeTargetsOf(values['scrape-targets'], deployment));
  } catch (e) {
    io.err(`disagg local: ${(e as Error).message}`);
    return ExitCode.INTERNAL;
  }

  const failed = runs.some(r => r.failed > 0 || r.succeeded === 0);
  if (json) {
    io.out(JSON.stringify({
      deployment: {
        model: deployment.servedModelName,
        description: deployment.description,
        mode: ep ? 'expert-parallel' : pd ? 'prefill-decode' : 'aggregated',
        pools: deployment.pools.map(p => ({
          name: p.name,
          role: p.role,
          replicas: p.replicas,
          tensorParallel: p.tensorParallel,
          // per sim-worker: an expert-parallel group's KV cache is split over its ranks
          kvTokens: kvTokens ?? Math.floor(p.kvTokensPerReplica / (p.ranks?.ranksPerGroup ?? 1)),
          ...(p.ranks ? { ranks: p.ranks } : {}),
        })),
        speedup,
      },
      workload: { ...workload, text: values.text, concurrency, api },
      runs,
      processes: pids,
    }, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2));
    return failed ? ExitCode.NEGATIVE : ExitCode.OK;
  }
  const rows = runs.map(r => [
    r.label, String(r.succeeded), String(r.failed),
    fmt(r.ttftSeconds.p50), fmt(r.ttftSeconds.p90), fmt(r.ttftSeconds.p99),
    fmt(r.tpotSeconds.p50), fmt(r.tpotSeconds.p90), fmt(r.tpotSeconds.p99),
    r.requestsPerSecond.toFixed(2), r.outputTokensPerSecond.toFixed(0), `${(r.prefixHitRate * 100).toFixed(1)}%`,
    fmt(r.routerOverheadSeconds),
  ]);
  io.out([
    `disagg local: ${deployment.servedModelName} (${deployment.description}), ${shape}`,
    `  ${workloadText}`,
    '',
    ...renderTable(['policy', 'ok', 'failed', 'TTFT p50', 'p90', 'p99', 'TPOT p50', 'p90', 'p99', 'req/s', 'out tok/s', 'prefix hits', 'router overhead'],
      rows, [false, true, true, true, true, true, true, true, true, true, true, true, true]),
  ].join('\n'));
  const [a, ...others] = runs;
  if (others.length > 0) io.out('');
  for (const b of others) {
    io.out(`  ${a.label} vs ${b.label}: TTFT p90 ${ratio(a.ttftSeconds.p90, b.ttftSeconds.p90)}, ` +
      `TPOT p90 ${ratio(a.tpotSeconds.p90, b.tpotSeconds.p90)}, throughput ${ratio(a.requestsPerSecond, b.requestsPerSecond)}, ` +
      `prefix hits ${(a.prefixHitRate * 100).toFixed(1)}% vs ${(b.prefixHitRate * 100).toFixed(1)}%`);
  }
  // Where requests went, per role: a baseline that leaves replicas idle is no fair baseline.
  const spread = (counts: Record<string, number>) => Object.keys(counts).sort().map(k => counts[k]).join(' / ');
  for (const r of runs) {
    if (r.ranks) {
      // Per rank, idle ones included (the requests' endpoints name only ranks that served one).
      const per = (role: string) => r.ranks!.filter(k => deployment.pools.find(p => p.name === k.pool)?.role === role).map(k => k.requests).join(' / ');
      io.out(`  ${r.label}: requests per decode rank ${per('decode')}; prefill legs per prefill rank ${per('prefill') || 'none'}`);
      continue;
    }
    io.out(`  ${r.label}: requests per ${pd ? 'decode' : 'worker'} endpoint ${spread(r.endpoints)}` +
      (pd ? `; prefill legs per prefill endpoint ${spread(r.prefillEndpoints) || 'none'}` : ''));
  }
  // Where the time went (the router's phases): which phase to look at when TTFT or E2E is high.
  for (const r of runs) {
    for (const b of r.phases) io.out(`  ${r.label}: mean per request, ${formatBreakdown(b, fmt)}`);
  }
  // Each rank's load (--expert-parallel): where the router sent each leg, and what the rank did.
  for (const r of ep ? runs : []) {
    io.out('');
    io.out(`  ${r.label}: load per data-parallel rank`);
    const rows2 = (r.ranks ?? []).map(k => [
      k.pool, String(k.group), String(k.pod), String(k.rank), k.endpoint, String(k.routedLegs), String(k.requests),
      String(k.promptTokens), String(k.cachedTokens), k.promptTokens > 0 ? `${((k.cachedTokens / k.promptTokens) * 100).toFixed(1)}%` : '-',
      String(k.kvTransfers), k.routerRank >= 0 ? String(k.routerRank) : '-',
    ]);
    io.out(renderTable(['pool', 'group', 'pod', 'rank', 'endpoint', 'routed', 'requests', 'prompt tok', 'cached tok', 'hit', 'KV transfers', 'router rank'],
      rows2, [false, true, true, true, false, true, true, true, true, true, true, true]).map(l => `  ${l}`).join('\n'));
  }
  for (const r of runs) {
    if (r.idleRanks && r.idleRanks.length > 0) {
      const decodeRanks = (r.ranks ?? []).filter(k => deployment.pools.find(p => p.name === k.pool)?.role === 'decode').length;
      // A cache-aware policy keeps each tenant's conversations where its prefix is cached: with fewer
      // tenants than ranks, and a load the busy ranks absorb, the others wait for load or tenants.
      const why = r.policy !== 'round-robin' && workload.tenants < decodeRanks
        ? ` (${r.policy} keeps each of the ${workload.tenants} tenants' prefixes on the ranks that cache them, fewer than the ${decodeRanks} decode ranks, `
          + 'and moves work only when those ranks are loaded)'
        : '';
      io.err(`disagg local: ${r.label}: ${r.idleRanks.length} rank(s) got no work: ${r.idleRanks.join(', ')}${why}; ` +
        `more tenants (--tenants ${Math.max(decodeRanks, workload.tenants)}), requests (--requests) or clients (--concurrency) reach them`);
    }
    if (r.timedOut) io.err(`disagg local: the ${r.label} run hit --timeout; raise it or lower --requests`);
    if (r.firstError) io.err(`disagg local: ${r.failed} ${r.label} request(s) failed; first: ${r.firstError}`);
  }
  return failed ? ExitCode.NEGATIVE : ExitCode.OK;
}
