/* eslint-disable */
// ~~ Generated from engine/schema/engine-config.schema.json by projenrc/engine-config-types.ts. Do not edit:
// change the schema and run `npx projen engine:schema-types` (test/engine/engine-config-types.test.ts checks it).

/**
 * Simulation: lower KV tiers of each replica of the pool, in the order host, disk, remote, each at most once (engine/README.md, Lower KV tiers). Every full block a replica computes is written through to its tiers (skipped while a tier's write link is more than maxWriteBacklogSeconds behind); at admission the prefix continues GPU hits -> host -> disk -> remote and the hits are loaded instead of recomputed.
 *
 * @maxItems 3
 */
export type KvTiers = {
  $comment?: string;
  /**
   * host: CPU memory of the replica; disk: its local NVMe; remote: one store shared by every replica of every pool that lists it.
   */
  tier: 'host' | 'disk' | 'remote';
  /**
   * KV bytes held: per replica for host and disk; the whole shared store for remote (the same value in every pool that lists it). At least one KV block (kvBlockSize x model.kvBytesPerToken).
   */
  capacityBytes: number;
  /**
   * One replica's read bandwidth from the tier into GPU memory (a FIFO link per replica and tier).
   */
  readBytesPerSecond: number;
  /**
   * One replica's write bandwidth to the tier (a FIFO link per replica and tier).
   */
  writeBytesPerSecond: number;
  /**
   * Fixed latency of each read or write.
   */
  latencySeconds?: number;
  /**
   * An offload is skipped (counted in kvTiers.<tier>.offloadsSkipped) when the write link is more than this far behind.
   */
  maxWriteBacklogSeconds?: number;
}[];

/**
 * The JSON configuration the constructs resolve for the C++ engine (a ConfigMap in a cluster; a file for `disagg-engine cost --config`). The engine keeps no hardware or model table: every number here was resolved from src/catalog and src/sizing. The cost model reads model, hardware, parallel and efficiency (a cost-model or simulation file has both model and hardware); the router reads router, policy, pools and endpoints (a router file has router; written by src/k8s/private/router-config.ts). Field names, defaults and rules mirror engine/src/core/cost_model_config.cc (a jest test compares them).
 */
export interface DisaggEngineConfiguration {
  /**
   * Free text, ignored by the engine (e.g. where the numbers came from).
   */
  $comment?: string;
  /**
   * Resolved numbers of the served model at the chosen precisions and tensor-parallel size.
   */
  model: {
    $comment?: string;
    /**
     * Model name, for reports only.
     */
    name?: string;
    /**
     * Weight bytes one tensor-parallel rank holds and streams from HBM every step.
     */
    weightBytesPerRank: number;
    /**
     * KV-cache bytes of one token for the whole model, counted once (2 x layers x KV heads x head dim x bytes; MLA: layers x (latent + rope dims) x bytes). A prefill-to-decode transfer moves this per token unless kvBytesPerTokenPerRank says the ranks hold copies.
     */
    kvBytesPerToken: number;
    /**
     * KV bytes of one token on one rank; 0 means kvBytesPerToken / (tensorParallel x pipelineParallel). Set it when the ranks hold copies (GQA with more ranks than KV heads, MLA's latent under TP): a P/D transfer, a tier load and a tier block then count every rank's copy (kvBytesPerTokenPerRank x tensorParallel x pipelineParallel per token), as the connectors move them: every decode rank reads its own whole copy (vLLM's NIXL; Mooncake's SGLang table moves 49 MB for 128 tokens of Qwen3-235B at TP8, twice the model's 25 MB).
     */
    kvBytesPerTokenPerRank?: number;
    /**
     * Parameters one token passes through (MoE: the active ones); 2 FLOPs each per token.
     */
    activeParameters: number;
    /**
     * Transformer layers.
     */
    layers: number;
    /**
     * Hidden size: width of the activations all-reduced twice per layer under tensor parallelism.
     */
    hiddenSize: number;
    /**
     * Query heads x head dim, for attention FLOPs (4 per layer per attended token pair); 0 means hiddenSize.
     */
    attentionWidth?: number;
    /**
     * Bytes of one activation element in all-reduces (2 for BF16).
     */
    activationBytes?: number;
    /**
     * MoE: the routed experts' part of weightBytesPerRank. A step reads the share its tokens select, expected 1 - (1 - expertsPerToken/experts)^tokens. 0: dense.
     */
    expertWeightBytesPerRank?: number;
    /**
     * MoE: routed experts per layer (8 for Mixtral). 0: dense.
     */
    experts?: number;
    /**
     * MoE: routed experts each token selects (2 for Mixtral), 1 to experts. 0: dense.
     */
    expertsPerToken?: number;
    /**
     * MoE: layers with routed experts (58 of DeepSeek-V3's 61), at most layers; each has one all-to-all dispatch and combine under expert parallelism. 0: every layer when experts > 0.
     */
    moeLayers?: number;
    /**
     * MoE: the routed experts' part of activeParameters (expertsPerToken experts of every MoE layer), at most activeParameters. Under expert parallelism this part is split over the expert-parallel ranks (times efficiency.expertImbalance), the rest over the data-parallel ranks. 0: none.
     */
    routedActiveParameters?: number;
    /**
     * Bytes of one activation element in the expert-parallel dispatch (1: FP8, as DeepEP's kernels and vLLM's DeepEP backends send it).
     */
    dispatchBytesPerElement?: number;
    /**
     * Bytes of one activation element in the expert-parallel combine (2: BF16).
     */
    combineBytesPerElement?: number;
  };
  /**
   * One accelerator and the links it uses, as resolved from the instance type.
   */
  hardware: {
    $comment?: string;
    /**
     * Dense (not sparse) peak FLOP/s at the compute precision.
     */
    peakFlopsPerSecond: number;
    /**
     * Dense peak FLOP/s attention's QK^T and AV run at: BF16's, or FP8's for an FP8 KV cache under FlashAttention 3 (src/sizing, Roofline.attentionPrecisionFor). 0 = peakFlopsPerSecond.
     */
    attentionFlopsPerSecond?: number;
    /**
     * HBM bandwidth in bytes/s.
     */
    hbmBytesPerSecond: number;
    /**
     * Per-accelerator, one-direction bandwidth of the intra-node link (NVLink, NeuronLink) in bytes/s. Required (> 0) when parallel.tensorParallel > 1.
     */
    interconnectBytesPerSecond?: number;
    /**
     * Fixed latency of one all-reduce in seconds.
     */
    interconnectLatencySeconds?: number;
    /**
     * Bandwidth one pod gets for a KV transfer, all its EFA interfaces together, in bytes/s.
     */
    fabricBytesPerSecond: number;
    /**
     * Fixed latency of one message over the fabric in seconds: an expert-parallel dispatch or combine that crosses nodes, a pipeline stage's activation send beyond scaleUpDomain, and a KV transfer unless kvTransferLatencySeconds is set.
     */
    fabricLatencySeconds?: number;
    /**
     * Fixed cost of one prefill-to-decode KV transfer besides its bytes, in seconds: the connector's handshake and completion notification and the first RDMA round trips. A transfer takes kvTransferLatencySeconds + bytes / (fabricBytesPerSecond x efficiency.fabric); the expert-parallel all-to-all keeps fabricLatencySeconds. 0 means fabricLatencySeconds. Published connectors pay far more than one expert-parallel message: Mooncake's vLLM connector (H800, 8x CX-7 RoCE, Qwen3-8B TP8) moves 20 MB in 0.54 ms and 4.5 GB in 31.65 ms (about 4e-4 s fixed and 72% of 200 GB/s); SGLang with Mooncake on H20 about 1.8e-3 s fixed and 84%. A pool or planner option overrides it in its own hardware object.
     */
    kvTransferLatencySeconds?: number;
    /**
     * Accelerators joined by the intra-node link (8 on p5en / p6-b200, 72 on a GB200 NVL72 UltraServer). Expert-parallel traffic inside it uses interconnectBytesPerSecond, beyond it scaleOutBytesPerSecond.
     */
    scaleUpDomain?: number;
    /**
     * One accelerator's share of the node's scale-out network (EFA total / accelerators per node; p5en: 3200 Gbit/s / 8 = 5e10 bytes/s). Required (> 0) when parallel.expertParallel > scaleUpDomain.
     */
    scaleOutBytesPerSecond?: number;
  };
  /**
   * How one replica is split.
   */
  parallel?: {
    $comment?: string;
    /**
     * Ranks that split every layer.
     */
    tensorParallel?: number;
    /**
     * Pipeline stages of one replica (vLLM --pipeline-parallel-size), each of tensorParallel ranks holding layers / pipelineParallel of the layers; model.weightBytesPerRank and kvBytesPerTokenPerRank are one stage's rank's (kvBytesPerTokenPerRank defaults to kvBytesPerToken / (tensorParallel x pipelineParallel)), so the replica's KV capacity is the sum over its stages. The engine keeps pipelineParallel micro-batches in flight: a step is the scheduler's batch spread over them and takes the largest micro-batch's time through every stage plus the activation sends between stages (disagg/cost_model.h), so one sequence steps in about the whole model's time and a full batch moves pipelineParallel micro-batches in that time. maxConcurrencyPerReplica and maxBatchedTokens bound all micro-batches together. Needs the stage-to-stage link (hardware.interconnectBytesPerSecond, or scaleOutBytesPerSecond when tensorParallel x pipelineParallel > scaleUpDomain); not with expertParallel or dataParallel > 1.
     */
    pipelineParallel?: number;
    /**
     * Data-parallel attention ranks of one replica (vLLM --data-parallel-size inside one expert-parallel group); the step's tokens are spread evenly over them. > 1 only with expertParallel = tensorParallel x dataParallel.
     */
    dataParallel?: number;
    /**
     * Ranks that share the routed experts (vLLM --enable-expert-parallel): 1, or tensorParallel x dataParallel, with model.experts + redundantExperts a multiple of it (whole experts per rank). Adds the all-to-all dispatch and combine per MoE layer (disagg/cost_model.h).
     */
    expertParallel?: number;
    /**
     * Extra physical expert replicas placed by EPLB (vLLM --num-redundant-experts); needs expertParallel > 1 and lowers the default expertImbalance.
     */
    redundantExperts?: number;
  };
  /**
   * Fractions of peak a real step reaches, and its fixed cost. Stated assumptions, not facts: calibrate them against measurements. Defaults match src/sizing/roofline.ts.
   */
  efficiency?: {
    $comment?: string;
    /**
     * Fraction of peak FLOP/s reached (model FLOPs utilization).
     */
    compute?: number;
    /**
     * Fraction of HBM bandwidth reached.
     */
    memory?: number;
    /**
     * Fraction of interconnect bandwidth an all-reduce reaches.
     */
    interconnect?: number;
    /**
     * Fraction of fabric bandwidth a KV transfer reaches.
     */
    fabric?: number;
    /**
     * Fraction of hardware.scaleOutBytesPerSecond the expert-parallel dispatch and combine reach (the on-node share uses efficiency.interconnect). Assumed: DeepEP reaches 0.8-0.95 of a CX7 InfiniBand NIC, but needs GPU-initiated RDMA, which EFA lacks.
     */
    allToAll?: number;
    /**
     * The busiest expert-parallel rank's routed-expert load over the mean (>= 1): its expert FLOPs and all-to-all bytes are the mean times this. 0: 1.4 without redundant experts, 1.1 with them (assumptions).
     */
    expertImbalance?: number;
    /**
     * Share of the all-to-all hidden behind compute (vLLM --enable-dbo, dual-batch overlap), at most the step's max(compute, memory). 0: not overlapped, vLLM's default.
     */
    allToAllOverlap?: number;
    /**
     * Fixed cost of every non-empty step (scheduling, kernel launches) in seconds.
     */
    stepOverheadSeconds?: number;
    /**
     * Fixed cost of one layer of every non-empty step in seconds: the small kernels (norms, rotary, activation) and each kernel's launch and ramp, which a small batch's FLOPs and bytes do not account for.
     */
    layerOverheadSeconds?: number;
    /**
     * Cost of one sequence of every step in seconds, prefill chunks and decoding sequences alike: the engine's CPU time per running sequence (scheduling, sampling bookkeeping, detokenization in the engine's process). vLLM's V0 engine (before v0.6.0, September 2024) spent it in every step (https://blog.vllm.ai/2024/09/05/perf-update.html); 0: none, as vLLM V1.
     */
    sequenceOverheadSeconds?: number;
    /**
     * Simulation: the API server's time per request in seconds (HTTP, tokenization, hand-off to the engine, the streamed answer); each request reaches its engine this much after it arrives, so TTFT and E2E include it.
     */
    requestOverheadSeconds?: number;
  };
  /**
   * The router process (`disagg-engine router`).
   */
  router?: {
    $comment?: string;
    /**
     * HTTP port of the OpenAI-compatible API (and /health, /metrics).
     */
    listenPort?: number;
    /**
     * Model name clients send; the workers' --served-model-name.
     */
    servedModelName: string;
    /**
     * Tokens per KV block: the workers' --block-size, and the granularity of the prefix index.
     */
    kvBlockSize?: number;
    /**
     * How KV moves from the prefill pool to the decode pool. The object form feeds the router's metrics: disagg_router_kv_transport_info{backend, provider} and disagg_router_kv_transfer_bytes_total per endpoint pair (engine/src/servers/router/request_phases.h). The older string form ('nixl-libfabric', 'nixl-ucx') names the backend alone. Absent: neither is exported; the per-pair transfer times are.
     */
    kvTransfer?:
      | ('nixl-libfabric' | 'nixl-ucx')
      | {
          /**
           * The pools' NIXL backend (kv_connector_extra_config.backends): LIBFABRIC over EFA (provider efa), or UCX (provider tcp on AWS).
           */
          backend: 'LIBFABRIC' | 'UCX';
          /**
           * KV-cache bytes of one token moved from prefill to decode: all layers, every rank's copy (KV heads replicated over tensor-parallel ranks move once per rank).
           */
          bytesPerToken?: number;
        };
    /**
     * Upper bound of one proxied request.
     */
    requestTimeoutSeconds?: number;
    /**
     * Requests proxied at once (the router's --max-inflight); the simulator bounds its routed requests the same way.
     */
    maxInflight?: number;
    /**
     * Requests waiting for one of the maxInflight slots; beyond them the router answers 429 (--max-queue).
     */
    maxQueue?: number;
    /**
     * Longest wait for a slot; then 429 (--queue-timeout-ms / 1000).
     */
    queueTimeoutSeconds?: number;
    /**
     * Folder with the served model's tokenizer.json and tokenizer_config.json (and chat_template.jinja when the model has one): prompts get the token ids and chat template vLLM uses, for prefix routing on the block hashes in vLLM's KV events, and the router serves /tokenize and /detokenize (--tokenizer).
     */
    tokenizer?: string;
    /**
     * The workers' --max-model-len: what /tokenize answers as max_model_len (vLLM's TokenizeResponse requires an integer). Unset: the tokenizer's model_max_length when it is a real length, else null (--max-model-len).
     */
    maxModelLen?: number;
    /**
     * Port of the peer-snapshot listener (GET /snapshot: the router's KV-block index, compact and bounded, for a restarting peer router), apart from listenPort, which a gateway exposes to clients; expose it to the routers only. 0: none (--peer-port).
     */
    peerPort?: number;
    /**
     * Peer routers of an active-active pair or group: at start the router fetches one live peer's snapshot (never its own) and loads the entries of the endpoints it knows, resuming their KV events after the snapshot's sequence numbers; a failing peer means a cold start and a log line (--peers HOST[:PORT]).
     */
    peers?: {
      /**
       * DNS name whose A/AAAA records are the peer routers (a headless Service), or an address.
       */
      host: string;
      /**
       * Their peerPort. Default: this router's peerPort.
       */
      port?: number;
      /**
       * Limit of one snapshot exchange: connect, request, answer (--peer-timeout-ms).
       */
      timeoutMs?: number;
      /**
       * Blocks in a snapshot served or accepted, 18 bytes each with one router key (8 more per further key); beyond it the oldest are left out when serving, and a larger snapshot is refused when loading (--peer-snapshot-max-blocks).
       */
      maxBlocks?: number;
    };
    /**
     * API keys clients must send as 'Authorization: Bearer <key>' on /v1/*, /tokenize and /detokenize (vLLM's --api-key rule; 401 invalid_api_key otherwise); /health, /ready, /metrics and /scaling stay open. The router strips the header before forwarding: workers take no key. Absent: no keys asked for (--api-key-file).
     */
    apiKeys?: {
      /**
       * File of keys, one per line (blank lines and lines starting with '#' skipped, whitespace trimmed; at most 64 keys of at most 256 bytes), e.g. a mounted Secret. Read at start: missing, unreadable or without a key, the router does not start. Re-read within about a second when it changes (the kubelet's ..data symlink swap included); a version without keys is logged and the last good keys stay.
       */
      file: string;
    };
    /**
     * LoRA adapters the workers serve (vLLM --lora-modules), each NAME or NAME=PATH as --lora-modules takes them: a request whose model is one of the names is accepted, and its blocks are keyed apart from the base model's, as vLLM's are; /v1/models lists each as vLLM does (root: the PATH, when given; parent: the served model) (--lora-adapter).
     */
    loraAdapters?: string[];
    /**
     * Log every routing decision: each endpoint's cached prefix blocks, cost and load, and the pick (--log-decisions). A request gets the same in its response by sending X-Disagg-Explain: 1.
     */
    logDecisions?: boolean;
  };
  /**
   * How the router scores endpoints and when it disaggregates.
   */
  policy?: {
    $comment?: string;
    /**
     * A routing policy of the engine (engine/include/disagg/routing.h): round-robin, least-load, llm-d, sglang, dynamo or disagg. kv-aware (= llm-d) and least-loaded (= least-load) are the names the constructs' RouterPolicy writes.
     */
    name: 'round-robin' | 'least-load' | 'llm-d' | 'sglang' | 'dynamo' | 'disagg' | 'kv-aware' | 'least-loaded';
    /**
     * Score weights of the kv-aware policy (llm-d defaults: prefix 3, queue 2, kvUsage 2).
     */
    weights?: {
      prefix?: number;
      queue?: number;
      kvUsage?: number;
    };
    disaggregation?: {
      /**
       * Disaggregate when the chosen decode pod lacks at least this many prompt tokens in its cache.
       */
      minUncachedPromptTokens?: number;
    };
    /**
     * Simulation: further policy knobs by name (engine/include/disagg/routing.h PolicyOptions, e.g. overlapCredit, cacheThreshold).
     */
    options?: {
      [k: string]: number | undefined;
    };
    /**
     * Prefix scorers read the KV block index fed by the workers' KV events (index; the prompts the router routed in the last options.pendingBlocksMs, 2000 by default, count as cached on their endpoint until their events arrive) or the router's own routing history (history, approximate). auto: index when router.tokenizer loads, else history (logged, and disagg_router_prefix_source_info says which). With vLLM pods the index needs the served model's tokenizer: vLLM hashes the token ids of the chat-templated prompt.
     */
    prefixSource?: 'index' | 'history' | 'auto';
  };
  /**
   * Worker pools the router sends requests to; endpoints come from each pool's discovery.
   *
   * @minItems 1
   */
  pools?: {
    $comment?: string;
    name: string;
    role: 'prefill' | 'decode' | 'both';
    /**
     * Where endpoints come from: every A record of a headless Service, re-resolved periodically.
     */
    discovery?: (
      | {
          port: unknown;
          [k: string]: unknown | undefined;
        }
      | {
          ports: unknown;
          [k: string]: unknown | undefined;
        }
    ) & {
      type: 'dns';
      host: string;
      /**
       * The HTTP port of every address (one server per pod). Exclusive with ports.
       */
      port?: number;
      /**
       * HTTP ports of every address, ports[j] being the vLLM API server of the pod's local data-parallel rank j; every address x port is one endpoint, whose KV events are on kvEvents.port + j (vLLM offsets the KV-events port by the rank). Exclusive with port.
       *
       * @minItems 1
       * @maxItems 64
       */
      ports?: number[];
      refreshSeconds?: number;
    };
    /**
     * vLLM KV-event publishers (ZMQ PUB) on every endpoint's IP; with discovery.ports, the endpoint on ports[j] publishes on port + j.
     */
    kvEvents?: {
      port?: number;
      topicPrefix?: string;
      /**
       * vLLM's KV-event replay socket (KVEventsConfig.replay_endpoint, a ZMQ ROUTER) on every endpoint's IP, offset by the port index as port is. With it the router rebuilds an endpoint's index entries from the worker's buffer when it subscribes (a warm restart) and fills sequence gaps; without it a gap clears the endpoint's entries.
       */
      replayPort?: number;
    };
    replicas?: number;
    instanceType?: string;
    accelerator?: string;
    tensorParallel?: number;
    /**
     * Pipeline stages of each replica; for the simulation it wins over parallel.pipelineParallel (see there). A pool that changes it without weightBytesPerRank gets the top-level weights rescaled by tensorParallel x pipelineParallel.
     */
    pipelineParallel?: number;
    /**
     * Simulation, read on a decode pool: when the client sees a disaggregated request's first token. decode-step: the decode instance's first step after the KV transfer (vLLM NixlConnector P/D). transfer: the token the prefill instance sampled, once the KV transfer that carries it completes (DistServe, SGLang P/D). prefill: that token as soon as the prefill step that samples it completes (TensorRT-LLM's disaggregated server). With transfer or prefill the decode instance generates the other output - 1 tokens, and a request of one output token finishes at its first token. Prefill and aggregated pools ignore it.
     */
    firstTokenAt?: 'decode-step' | 'transfer' | 'prefill';
    weightBytesPerRank?: number;
    kvCacheBytesPerRank?: number;
    kvTokensPerReplica?: number;
    maxConcurrencyPerReplica?: number;
    /**
     * Simulation: token budget of one scheduler step (vLLM --max-num-batched-tokens). maxConcurrencyPerReplica is the step's sequence limit (vLLM --max-num-seqs, default 256).
     */
    maxBatchedTokens?: number;
    /**
     * Simulation: waiting-queue bound of each replica; requests beyond it are rejected.
     */
    maxWaitingRequests?: number;
    /**
     * Simulation: automatic prefix caching on the replica's KV pool.
     */
    prefixCaching?: boolean;
    /**
     * Simulation: mix prompt chunks and decodes in one step (vLLM V1). false: prefill-first steps of whole prompts without decodes (vLLM V0 without --enable-chunked-prefill, the baseline of DistServe and Splitwise).
     */
    chunkedPrefill?: boolean;
    /**
     * Simulation: the engine plans step k+1 while step k runs (vLLM --async-scheduling, on by default since vLLM 0.14), so a request that arrives during a step joins the step after the next one. false: it joins the next step.
     */
    asyncScheduling?: boolean;
    kvTiers?: KvTiers;
    /**
     * Simulation: scale this pool with the issue 24 rule (HPA on the pool's SLO pressure) during the run; replicas are then the ready ones at time 0, clamped to the bounds (engine/README.md, Autoscaling). Not with kvTiers.
     */
    autoscaling?: {
      $comment?: string;
      /**
       * Fewest replicas (0 only with scaleToZero; otherwise at least 1 stays).
       */
      minReplicas?: number;
      /**
       * Most replicas; the pool holds 2 x maxReplicas worker slots (replicas draining beside new ones), 64 endpoints in all.
       */
      maxReplicas: number;
      /**
       * Pressure to hold: desired = ceil(ready x pressure / target); 1 is the SLO (the prefill pressure is its utilization over what the pool sustains within the TTFT SLO for 99% of requests).
       */
      target?: number;
      /**
       * No change while |pressure / target - 1| <= tolerance (HPA's).
       */
      tolerance?: number;
      /**
       * A scale-up goes to the lowest recommendation of this window.
       */
      scaleUpStabilizationSeconds?: number;
      /**
       * A scale-down goes to the highest recommendation of this window.
       */
      scaleDownStabilizationSeconds?: number;
      /**
       * Allow 0 replicas after idleSecondsBeforeZero without requests; requests then wait for a replica.
       */
      scaleToZero?: boolean;
      /**
       * KEDA's cooldownPeriod.
       */
      idleSecondsBeforeZero?: number;
      /**
       * Time from the decision to a serving replica: nodeStartSeconds + imagePullSeconds + checkpointBytes / networkBytesPerSecond + checkpointBytes / nvmeBytesPerSecond + engineStartSeconds (a bandwidth of 0 skips its leg).
       */
      provisioning?: {
        $comment?: string;
        /**
         * A new GPU node through Karpenter and the EKS bootstrap (estimate).
         */
        nodeStartSeconds?: number;
        /**
         * The serving image (10-20 GB for vLLM; estimate).
         */
        imagePullSeconds?: number;
        /**
         * The model's weights, bytes.
         */
        checkpointBytes?: number;
        /**
         * Download of the checkpoint to the node (0: not downloaded).
         */
        networkBytesPerSecond?: number;
        /**
         * Read of the checkpoint from local NVMe into GPU memory (0: not read).
         */
        nvmeBytesPerSecond?: number;
        /**
         * Engine start: profiling, torch.compile, CUDA graph capture (estimate).
         */
        engineStartSeconds?: number;
      };
    };
    /**
     * Simulation: per-pool override of top-level model fields (key by key).
     */
    model?: {
      [k: string]: number | string | undefined;
    };
    /**
     * Simulation: per-pool override of top-level hardware fields (key by key).
     */
    hardware?: {
      [k: string]: number | string | undefined;
    };
    /**
     * Simulation: per-pool override of top-level parallel fields.
     */
    parallel?: {
      [k: string]: number | string | undefined;
    };
    /**
     * Simulation: per-pool override of top-level efficiency fields (key by key).
     */
    efficiency?: {
      [k: string]: number | string | undefined;
    };
  }[];
  /**
   * A static endpoint list, used instead of (or besides) pool discovery, e.g. for local runs.
   */
  endpoints?: {
    /**
     * Name of the pool the endpoint belongs to.
     */
    pool: string;
    /**
     * Base URL of the OpenAI-compatible server.
     */
    url: string;
    /**
     * ZMQ endpoint of its KV events.
     */
    kvEventsEndpoint?: string;
    /**
     * ZMQ ROUTER endpoint of its KV event replay (vLLM's optional replay socket); without it, a sequence gap clears the endpoint's index entries.
     */
    kvEventsReplayEndpoint?: string;
    /**
     * Global data-parallel rank of the engine behind the endpoint (vLLM --data-parallel-rank). Its KV-event batches name it (data_parallel_rank); batches naming another rank are dropped. Absent: learned from its first batch.
     */
    dataParallelRank?: number;
  }[];
  /**
   * SLO autoscaling. The router reads slo, prefill and decode: the SLO and the capacity model its per-pool scaling signals (GET /scaling, disagg_router_pool_* on /metrics) are computed against (engine/src/servers/router/README.md, Scaling signals). Given at all, the router also holds a request that finds no ready endpoint of its pool (up to router.queueTimeoutSeconds) so that a pool scaled to zero can come back. Absent: the signals use the defaults below. The simulator reads its own keys of this block.
   */
  autoscaling?: {
    $comment?: string;
    /**
     * The objectives the pressure is measured against: 1.0 = the next request would just meet them.
     */
    slo?: {
      $comment?: string;
      /**
       * Time to first token, seconds (prefill pressure).
       */
      ttftSeconds?: number;
      /**
       * Time per output token, seconds (decode pressure).
       */
      tpotSeconds?: number;
    };
    /**
     * One prefill endpoint's capacity: predicted TTFT = (waiting prompt tokens + mean prompt) / (tokensPerSecond x ready endpoints) + fixedSeconds.
     */
    prefill?: {
      $comment?: string;
      /**
       * Prompt tokens one endpoint prefills per second (from the cost model).
       */
      tokensPerSecond?: number;
      /**
       * Latency of a prefill on top of its tokens, seconds.
       */
      fixedSeconds?: number;
    };
    /**
     * The decode step model: predicted TPOT = stepSecondsBase + stepSecondsPerSequence x (running sequences per endpoint + 1), and the sequence slots of an endpoint. Aggregated (non-P/D) deployments use this block alone.
     */
    decode?: {
      $comment?: string;
      /**
       * Step time of the batch without its sequences, seconds.
       */
      stepSecondsBase?: number;
      /**
       * Step time each running sequence adds, seconds.
       */
      stepSecondsPerSequence?: number;
      /**
       * Sequences one decode endpoint holds at once (its KV capacity at the planned context); the pressure then also counts running sequences / (maxSequences x ready endpoints) x step(maxSequences) / step(running per endpoint) / 0.9 (output tokens per second asked over those full endpoints make). 0: unknown, no such term.
       */
      maxSequences?: number;
    };
    /**
     * Simulation: the autoscaled pools' rule runs every this many seconds (HPA's sync period).
     */
    evaluationIntervalSeconds?: number;
    /**
     * Simulation: width of the scaling report's windows (SLO attainment and mean replicas over time).
     */
    windowSeconds?: number;
    /**
     * Simulation: GPU-hours count from 0 to max(this, the run's end), static and autoscaled pools alike; the rule runs until then (0: the run's end).
     */
    horizonSeconds?: number;
    [k: string]: unknown | undefined;
  };
  /**
   * Planner (`disagg-engine plan`, addon plan()): searches replica counts and tensor-parallel sizes, aggregated and disaggregated, within maxAccelerators for the highest goodput per accelerator-dollar under slo, simulating workload at rates of a geometric grid (engine/include/disagg/planner.h). The TypeScript side resolves one pool template per tensor-parallel size (and instance type) into tensorParallelOptions, so the engine keeps no hardware table.
   */
  planner?: {
    $comment?: string;
    /**
     * Accelerators a deployment may use in all.
     */
    maxAccelerators: number;
    minAccelerators?: number;
    /**
     * @minItems 1
     */
    modes?: ('aggregated' | 'disaggregated')[];
    /**
     * Share of requests that must meet both SLOs at the goodput rate.
     */
    targetShare?: number;
    /**
     * Lowest arrival rate of the grid.
     */
    minRatePerSecond?: number;
    /**
     * Relative step of the rate grid: rate(i+1) = rate(i) x (1 + rateResolution).
     */
    rateResolution?: number;
    /**
     * Each candidate's search stops at boundSlack x its roofline bound.
     */
    boundSlack?: number;
    /**
     * Candidates whose goodput is below it rank after those that reach it.
     */
    requiredRatePerSecond?: number;
    /**
     * Default price of one accelerator-hour; the score is goodput x 3600 / cost per hour.
     */
    pricePerAcceleratorHour?: number;
    /**
     * Skip candidates that cannot enter the top rankDepth (exact).
     */
    prune?: boolean;
    /**
     * Candidates whose goodput is searched to the end.
     */
    rankDepth?: number;
    /**
     * Candidates in the result (0: all).
     */
    keep?: number;
    /**
     * Each probe simulates at least this long a window of arrivals (overload shows only once a queue has grown), and at least four request lifetimes at the SLO's edge (TTFT + mean output x TPOT; at most 600 s), as decode batches fill over one lifetime. 0: no window, the workload's requests only.
     */
    probeSeconds?: number;
    /**
     * Candidates searched at once (each batch against the top as it stands, committed in order: the result is the sequential search's). 0: one per hardware thread, at most 8.
     */
    threads?: number;
    /**
     * One pool template per tensor-parallel size (and instance type): a pools[] entry without name and replicas. Cost-model sections override the top-level ones key by key.
     *
     * @minItems 1
     */
    tensorParallelOptions: {
      $comment?: string;
      /**
       * For reports, e.g. "p5en.48xlarge tp4"; default "tp<N>".
       */
      label?: string;
      /**
       * Which pools the option may serve (both: aggregated only).
       */
      role?: 'any' | 'prefill' | 'decode' | 'both';
      tensorParallel?: number;
      weightBytesPerRank?: number;
      /**
       * Default: tensorParallel x pipelineParallel.
       */
      acceleratorsPerReplica?: number;
      pricePerAcceleratorHour?: number;
      /**
       * Overrides of the top-level model fields, key by key.
       */
      model?: {
        [k: string]: number | string | undefined;
      };
      /**
       * Overrides of the top-level hardware fields, key by key.
       */
      hardware?: {
        [k: string]: number | string | undefined;
      };
      /**
       * Overrides of the top-level parallel fields, key by key.
       */
      parallel?: {
        [k: string]: number | string | undefined;
      };
      /**
       * Overrides of the top-level efficiency fields, key by key.
       */
      efficiency?: {
        [k: string]: number | string | undefined;
      };
      kvTokensPerReplica?: number;
      kvCacheBytesPerRank?: number;
      maxConcurrencyPerReplica?: number;
      maxBatchedTokens?: number;
      maxWaitingRequests?: number;
      prefixCaching?: boolean;
      chunkedPrefill?: boolean;
      asyncScheduling?: boolean;
      /**
       * As pools[].pipelineParallel; acceleratorsPerReplica then defaults to tensorParallel x pipelineParallel.
       */
      pipelineParallel?: number;
      /**
       * As pools[].firstTokenAt (read when the option serves a decode pool).
       */
      firstTokenAt?: 'decode-step' | 'transfer' | 'prefill';
      kvTiers?: KvTiers;
    }[];
  };
  /**
   * Simulation: seed of the workload generator; the same seed gives the same summary.
   */
  seed?: number;
  /**
   * Simulation: latency targets of goodput (a request is good when it meets both).
   */
  slo?: {
    $comment?: string;
    ttftSeconds?: number;
    tpotSeconds?: number;
  };
  /**
   * Simulation: the traffic `disagg-engine simulate` runs (engine/include/disagg/workload.h).
   */
  workload?: {
    $comment?: string;
    kind?: 'single' | 'chat' | 'agentic' | 'trace';
    /**
     * Stop after this many requests (0: no limit). With arrival.stages and no requests, every stage's arrivals are sent (no limit).
     */
    requests?: number;
    /**
     * Closed loop when > 0 (kind single, requests > 0): this many clients, each sending its next request when the previous one ends; arrival is then ignored.
     */
    concurrency?: number;
    /**
     * No request arrives later (0: no limit). Not with arrival.stages, which end the run themselves.
     */
    durationSeconds?: number;
    /**
     * How prompts reach the server. completions: the prompt is exactly the workload's tokens (/v1/completions; what the simulator always did). chat: each message is wrapped in the sim-worker's chat template (a system header before the system prompt, a user header before each input, a tool header before each agentic tool output, the assistant header at the end), as `disagg local` sends through /v1/chat/completions. Not with kind trace (a trace's input_length counts every token).
     */
    api?: 'completions' | 'chat';
    vocab?: number;
    arrival?: {
      $comment?: string;
      /**
       * poisson, gamma (cv), mmpp (bursts), or constant: evenly spaced arrivals, arrival i at exactly i / rate (as benchmark clients at a constant rate send).
       */
      process?: 'poisson' | 'gamma' | 'mmpp' | 'constant';
      /**
       * Mean arrival rate (requests, chat sessions or agentic tasks per second); unused with stages.
       */
      ratePerSecond?: number;
      /**
       * Load in stages run back to back from time 0, each at its own rate for its own duration; arrivals stop at the end of the last. A constant stage sends ceil(rate x duration) requests, the first at its start (e.g. [{ratePerSecond: 8, durationSeconds: 600}, {ratePerSecond: 20, durationSeconds: 600}]: 4,800 then 12,000). Poisson, gamma and mmpp restart their draw at each boundary at the new rate. The summary covers all stages. Not with durationSeconds or concurrency; not swept or planned (the stages fix the rates).
       *
       * @minItems 1
       * @maxItems 1024
       */
      stages?: {
        ratePerSecond: number;
        durationSeconds: number;
      }[];
      cv?: number;
      burstFactor?: number;
      burstShare?: number;
      meanBurstSeconds?: number;
    };
    inputTokens?: LengthDistribution;
    outputTokens?: LengthDistribution;
    tenants?: {
      $comment?: string;
      /**
       * Shared prompts (tenants), each with its own system prompt that prefixes every prompt of that tenant.
       */
      count?: number;
      systemPromptTokens?: number;
      /**
       * popularity zipf: tenant k (1-based) has weight 1 / k^zipfExponent.
       */
      zipfExponent?: number;
      /**
       * How a request picks its tenant. zipf: drawn by Zipf(zipfExponent). equal: in turn (with users: the tenant x user slots), in an order shuffled once per run by the seed, as inference-perf cycles its prompts.
       */
      popularity?: 'zipf' | 'equal';
      /**
       * Kind single: users per tenant, each with one question of inputTokens tokens drawn once for the run and sent in every request of that user, so the whole prompt repeats (inference-perf's shared_prefix: num_groups x num_prompts_per_group prompts sent over and over). 0: every request's question is fresh text.
       */
      usersPerTenant?: number;
    };
    chat?: {
      $comment?: string;
      turns?: LengthDistribution;
      followupInputTokens?: LengthDistribution;
      thinkTimeSeconds?: number;
      maxContextTokens?: number;
    };
    agentic?: {
      $comment?: string;
      fanout?: number;
      depth?: number;
      toolOutputTokens?: LengthDistribution;
      stepGapSeconds?: number;
    };
    trace?: {
      $comment?: string;
      /**
       * JSONL file: one {timestamp_ms, input_length, output_length, hash_ids?, session_id?} per line.
       */
      path: string;
      /**
       * Tokens per trace hash id (Mooncake: 512).
       */
      blockTokens?: number;
      timeScale?: number;
      maxRecords?: number;
    };
  };
}
/**
 * Token counts: fixed (mean), uniform [min, max], or lognormal (mean, stddev); clamped to [min, max].
 */
export interface LengthDistribution {
  $comment?: string;
  distribution?: 'fixed' | 'uniform' | 'lognormal';
  mean?: number;
  stddev?: number;
  min?: number;
  max?: number;
}
