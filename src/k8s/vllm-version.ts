/**
 * The vLLM release a worker image runs, which decides what the workers' command line may use.
 *
 * An enum-like class: `VllmVersion.of('0.26.0')`, or `VllmVersion.BUNDLED` for the library's own
 * worker image. Each difference the constructs act on names the vLLM change behind it:
 *
 * | since | what changes here | source |
 * |---|---|---|
 * | 0.22.1 | NixlConnector pools take `kv_role` `kv_producer` (prefill) and `kv_consumer` (decode); `kv_both` logs a removal warning | vLLM PR #43874, RFC #43807 |
 * | 0.24.0 | KV events are maps tagged `"type"` in a positional batch (the router reads both) | vLLM PR #42892 |
 * | 0.26.0 | replay replies carry the topic (the router reads both framings) | vLLM PR #45177 |
 *
 * Changes that need no switch (the same command line is right before and after):
 * - Ray is optional in vLLM (PR #36170, March 2026): the bundled image installs it for multi-node replicas.
 * - NIXL holds a finished prompt's KV blocks for a lease the decode side renews (`kv_lease_duration`,
 *   default 30 s, PR #41383) instead of `VLLM_NIXL_ABORT_REQUEST_TIMEOUT`: NixlConnector pools set the
 *   lease to NIXL_KV_LEASE_SECONDS (older releases ignore the key).
 * - The `naive` all-to-all backend was removed (PR #33728); vLLM falls back to `allgather_reducescatter`.
 *
 * Every supported release starts its API server as `vllm serve <model>`; the older
 * `python -m vllm.entrypoints.openai.api_server` is deprecated.
 */
export class VllmVersion {
  /** vLLM 0.19.1, the release the bundled worker image was built on until December 2026. */
  public static readonly V0_19_1 = new VllmVersion(0, 19, 1);
  /** vLLM 0.26.0: events as maps, topic-framed replay. */
  public static readonly V0_26_0 = new VllmVersion(0, 26, 0);
  /** vLLM 0.28.0, the first AWS Deep Learning Container on Ubuntu 24.04 and CUDA 13 (`vllm:0.28.0-gpu-py312-cu130-ubuntu24.04-ec2`). */
  public static readonly V0_28_0 = new VllmVersion(0, 28, 0);
  /** vLLM 0.31.0, the release the bundled worker image (images/engine) is built on (`vllm:0.31.0-gpu-py312-cu130-ubuntu24.04-ec2`). */
  public static readonly V0_31_0 = new VllmVersion(0, 31, 0);
  /** The release of the library's own worker image (`images/engine`, `EngineImage`). */
  public static readonly BUNDLED = VllmVersion.V0_31_0;

  /**
   * A release written 'X.Y.Z' (a leading 'v' and a suffix such as 'rc1' or '.post1' are allowed).
   * @throws when it is not such a version
   */
  public static of(version: string): VllmVersion {
    const parsed = parseRelease(version);
    if (parsed === undefined) {
      throw new Error(`'vllmVersion' ('${version}') must be a vLLM release such as '0.26.0'`);
    }
    return new VllmVersion(...parsed);
  }

  /**
   * The release a vLLM image reference names in its tag, when the image's name says vLLM and the tag
   * starts with a release (the AWS Deep Learning Containers' `vllm:0.31.0-gpu-...`, upstream
   * `vllm/vllm-openai:v0.26.0`); undefined otherwise (another image's tag is its own version).
   */
  public static fromImage(image: string): VllmVersion | undefined {
    // Only a vLLM image's tag is a vLLM release: 'registry/disagg/engine:0.1.0' is this library's version.
    const repository = (image ?? '').replace(/(@sha256:[0-9a-f]+)?$/, '').replace(/:[^/:]+$/, '');
    if (!/vllm/i.test(repository.split('/').pop() ?? '')) return undefined;
    const tag = /:([^/@:]+)(@sha256:[0-9a-f]+)?$/.exec(image ?? '')?.[1];
    const parsed = tag === undefined ? undefined : parseRelease(tag.split('-')[0]);
    return parsed === undefined ? undefined : new VllmVersion(...parsed);
  }

  /** 'X.Y.Z'. */
  public readonly version: string;

  private constructor(private readonly major: number, private readonly minor: number, private readonly patch: number) {
    this.version = `${major}.${minor}.${patch}`;
  }

  /** Whether this release is `version` or newer. */
  public atLeast(version: VllmVersion): boolean {
    return this.major !== version.major ? this.major > version.major
      : this.minor !== version.minor ? this.minor > version.minor : this.patch >= version.patch;
  }

  /** Whether NixlConnector takes `kv_producer` / `kv_consumer` instead of `kv_both` (vLLM PR #43874). */
  public get kvRolesPerPool(): boolean {
    return this.atLeast(new VllmVersion(0, 22, 1));
  }
}

/** [major, minor, patch] of 'X.Y.Z' with an optional 'v' and suffix, or undefined. */
function parseRelease(text: string): [number, number, number] | undefined {
  const m = /^v?(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:(?:rc|\.post|\.dev|\+)[0-9a-z.]*)?$/i.exec(text ?? '');
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}
