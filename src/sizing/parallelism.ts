import { requirePositive } from './private/units';

/**
 * Inputs of {@link Parallelism.of}.
 */
export interface ParallelismProps {
  /**
   * Tensor-parallel size: every layer split across this many devices (vLLM `--tensor-parallel-size`).
   * @default 1
   */
  readonly tensorParallel?: number;
  /**
   * Pipeline-parallel size: layers split into this many stages (vLLM `--pipeline-parallel-size`).
   * @default 1
   */
  readonly pipelineParallel?: number;
  /**
   * Data-parallel attention ranks in one replica (vLLM `--data-parallel-size`). With expert parallelism
   * they share one expert-parallel group; without it they are independent copies in one server.
   * @default 1
   */
  readonly dataParallel?: number;
  /**
   * Shard routed experts across the `tensorParallel x dataParallel` ranks instead of splitting every
   * expert by tensor parallelism (vLLM `--enable-expert-parallel`). MoE models only.
   * @default false
   */
  readonly expertParallel?: boolean;
  /**
   * Extra expert replicas for load balancing (vLLM `--num-redundant-experts`, with EPLB); they take memory
   * and count towards the experts each rank holds.
   * @default 0
   */
  readonly redundantExperts?: number;
}

/**
 * How one replica of a model is split across devices.
 */
export class Parallelism {
  /**
   * A parallel layout.
   *
   * @throws when a size is not a positive integer or redundantExperts is negative
   */
  public static of(props: ParallelismProps): Parallelism {
    return new Parallelism(props);
  }

  /** Tensor-parallel size. */
  public readonly tensorParallel: number;
  /** Pipeline-parallel size. */
  public readonly pipelineParallel: number;
  /** Data-parallel attention ranks per replica. */
  public readonly dataParallel: number;
  /** Whether routed experts are sharded by expert parallelism. */
  public readonly expertParallel: boolean;
  /** Redundant expert replicas. */
  public readonly redundantExperts: number;
  /** Ranks that share the routed experts: `tensorParallel x dataParallel` with expert parallelism, else 1. */
  public readonly expertParallelSize: number;
  /** Devices one replica uses: `tensorParallel x pipelineParallel x dataParallel`. */
  public readonly acceleratorsPerReplica: number;

  private constructor(props: ParallelismProps) {
    this.tensorParallel = props.tensorParallel ?? 1;
    this.pipelineParallel = props.pipelineParallel ?? 1;
    this.dataParallel = props.dataParallel ?? 1;
    this.expertParallel = props.expertParallel ?? false;
    this.redundantExperts = props.redundantExperts ?? 0;
    requirePositive('tensorParallel', this.tensorParallel, true, 'use 1, 2, 4 or 8');
    requirePositive('pipelineParallel', this.pipelineParallel, true, 'use 1 unless the model spans nodes');
    requirePositive('dataParallel', this.dataParallel, true, 'use 1 unless you run expert parallelism');
    if (!(Number.isInteger(this.redundantExperts) && this.redundantExperts >= 0)) {
      throw new Error(`'redundantExperts' (${this.redundantExperts}) must be an integer >= 0; use 0 without EPLB`);
    }
    this.expertParallelSize = this.expertParallel ? this.tensorParallel * this.dataParallel : 1;
    this.acceleratorsPerReplica = this.tensorParallel * this.pipelineParallel * this.dataParallel;
  }

  /** 'TP 2 x PP 1 x DP 1 (EP 2)' */
  public toString(): string {
    const ep = this.expertParallel ? ` (EP ${this.expertParallelSize})` : '';
    return `TP ${this.tensorParallel} x PP ${this.pipelineParallel} x DP ${this.dataParallel}${ep}`;
  }
}
