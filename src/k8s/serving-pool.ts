import { IConstruct } from 'constructs';
import { AcceleratedInstanceType } from '../catalog';

/**
 * What a KV cache (e.g. a {@link TieredKvCache}) adds to the pods of a serving pool.
 */
export interface KvCacheAttachment {
  /**
   * The cache's vLLM KV connector, one `KVTransferConfig` as JSON (`{"kv_connector": ..., "kv_role": ...}`).
   * A pool that already moves KV cache with NIXL (prefill or decode role) combines both in a
   * `MultiConnector`, NIXL first; a pool without one passes it as `--kv-transfer-config`.
   * @see https://docs.vllm.ai/en/latest/features/disagg_prefill.html
   */
  readonly connectorConfig: string;
  /**
   * vLLM flags that replace `connectorConfig` when the pool has no other connector, per server process
   * (e.g. `--kv-offloading-backend native --kv-offloading-size 64`).
   * @default - `--kv-transfer-config <connectorConfig>`
   */
  readonly standaloneArgs?: string[];
  /**
   * Environment variables of every vLLM container of the pool.
   * @default - none
   */
  readonly env?: { [name: string]: string };
  /**
   * Host memory each pod holds for the cache, GiB; the pod's memory request and limit include it.
   * @default 0
   */
  readonly hostMemoryGib?: number;
  /**
   * Directory the cache writes inside the container; an emptyDir of `diskGib` is mounted there (on the
   * node's NVMe RAID0 array, where the kubelet keeps emptyDirs on `AcceleratedNodeGroup` nodes).
   * @default - no disk
   */
  readonly diskMountPath?: string;
  /**
   * Size limit of the disk directory, GiB.
   * @default - none
   */
  readonly diskGib?: number;
  /**
   * Name used in error messages, e.g. the cache construct's path.
   * @default 'kv cache'
   */
  readonly description?: string;
}

/**
 * A pool of vLLM servers whose pods can be customised after construction: the prefill and decode pools
 * of a `DisaggregatedInference`, or an `ExpertParallelPool`. Objects are built at synthesis, so
 * everything added here lands in the manifest.
 */
export interface IServingPool extends IConstruct {
  /** Name of the pool's workload and headless Service. */
  readonly poolName: string;
  /** 'prefill', 'decode' or 'serve' (a pool that runs whole requests). */
  readonly role: string;
  /** The instance type the pods run on. */
  readonly instanceType: AcceleratedInstanceType;
  /** Accelerators each pod requests. */
  readonly acceleratorsPerPod: number;
  /** vLLM server processes per pod (one per local data-parallel rank for per-rank endpoints, else 1). */
  readonly serverProcessesPerPod: number;
  /** Bytes of KV cache the pod holds in accelerator memory (the HBM tier), all its accelerators together. */
  readonly kvCacheBytesPerPod: number;
  /** Host memory each pod may request, GiB: its share of the instance's RAM less a 5% system reserve. */
  readonly hostMemoryGibPerPod: number;
  /** /dev/shm of each pod, GiB (a memory-backed emptyDir: it counts against the pod's memory). */
  readonly sharedMemoryGib: number;
  /** Local NVMe each pod may fill, GiB: its share of the instance store less the reserve and the model cache. */
  readonly localDiskGibPerPod: number;
  /** Whether the pool moves KV cache with NIXL (a prefill or decode pool). */
  readonly usesNixl: boolean;

  /** Adds (or replaces) an environment variable of every vLLM container. */
  addEnv(name: string, value: string): void;

  /** Appends vLLM arguments to every server process, after the generated ones. */
  addArgs(...args: string[]): void;

  /**
   * Attaches a KV cache: its connector, env, host memory and disk.
   * @throws when a cache is attached already
   */
  attachKvCache(attachment: KvCacheAttachment): void;
}
