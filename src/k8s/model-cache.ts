/**
 * Where the workers keep downloaded model files.
 *
 * A union-like class. Nodes of an `AcceleratedNodeGroup` assemble their instance-store NVMe drives into
 * one RAID0 array mounted at `/mnt/k8s-disks/0` and move kubelet and containerd state onto it (nodeadm
 * `localStorage.strategy: RAID0`), so both choices land on local NVMe.
 */
export class ModelCache {
  /** Default host directory of {@link ModelCache.nodeLocal}: on the node's NVMe RAID0 array. */
  public static readonly DEFAULT_HOST_PATH = '/mnt/k8s-disks/0/disagg/models';

  /**
   * A directory on the node (hostPath), shared by every worker on the node and kept across pod
   * restarts, so a model downloads once per node. Needs a namespace whose Pod Security level allows
   * hostPath volumes (privileged).
   *
   * @param path absolute host directory
   * @default path ModelCache.DEFAULT_HOST_PATH
   */
  public static nodeLocal(path?: string): ModelCache {
    const p = path ?? ModelCache.DEFAULT_HOST_PATH;
    if (!p.startsWith('/') || p === '/') {
      throw new Error(`'modelCache' path ('${p}') must be an absolute directory below '/', e.g. '${ModelCache.DEFAULT_HOST_PATH}'`);
    }
    return new ModelCache('host-path', p, undefined);
  }

  /**
   * An emptyDir per pod (on the kubelet's disk, the NVMe array on accelerated node groups): restricted
   * Pod Security compatible, but every new pod downloads the model again.
   *
   * @param sizeGib size limit, GiB
   * @default sizeGib - twice the checkpoint size
   */
  public static podLocal(sizeGib?: number): ModelCache {
    if (sizeGib !== undefined && !(Number.isFinite(sizeGib) && sizeGib > 0)) {
      throw new Error(`'modelCache' size (${sizeGib}) must be a positive number of GiB`);
    }
    return new ModelCache('empty-dir', undefined, sizeGib);
  }

  /** 'host-path' or 'empty-dir'. */
  public readonly kind: string;
  /**
   * Host directory.
   * @default - none for an emptyDir
   */
  public readonly hostPath?: string;
  /**
   * emptyDir size limit, GiB.
   * @default - sized from the checkpoint
   */
  public readonly sizeGib?: number;

  private constructor(kind: string, hostPath?: string, sizeGib?: number) {
    this.kind = kind;
    this.hostPath = hostPath;
    this.sizeGib = sizeGib;
  }
}
