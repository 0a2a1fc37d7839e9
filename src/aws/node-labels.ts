/** Label keys this library puts on accelerated nodes (selectors in the workload constructs use them). */
export class NodeLabels {
  /** The EC2 instance type, e.g. `p5en.48xlarge`. */
  public static readonly INSTANCE_TYPE = 'disagg.dev/instance-type';
  /** The accelerator, lower case, e.g. `h200`, `trainium2`. */
  public static readonly ACCELERATOR = 'disagg.dev/accelerator';
  /** The accelerator vendor, `nvidia` or `aws`. */
  public static readonly ACCELERATOR_VENDOR = 'disagg.dev/accelerator-vendor';
  /** The role of the pool the nodes serve, e.g. `prefill`, `decode`, `inference`. */
  public static readonly POOL_ROLE = 'disagg.dev/pool-role';

  private constructor() {}
}
