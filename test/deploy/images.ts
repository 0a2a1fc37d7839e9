/**
 * What an engine image takes on a node's disk, by the Dockerfile of its CDK asset: containerd keeps the
 * compressed layers it pulled beside the unpacked ones, so both count.
 */
import * as fs from 'fs';
import * as path from 'path';

/** GiB on disk (compressed + unpacked) of each image this package builds. */
export const IMAGE_DISK_GIB: Record<string, number> = {
  // vLLM images are 12 GB compressed and 22-29 GB unpacked (vLLM #17163, #22377; ../shared/REFERENCE.md):
  // the middle of that range unpacked.
  'images/engine/Dockerfile': 12 + 25,
  'images/engine-neuron/Dockerfile': 12 + 25,
  // Measured here: 101 MB unpacked, 41 MB gzipped (scripts/build-slim-image.sh; bench/RESULTS.md).
  'images/engine-slim/Dockerfile': 0.15,
};

/**
 * The disk size of an image reference in a synthesized manifest, for the Docker image assets of a cloud
 * assembly (an asset's image is tagged with its hash); undefined for images the package does not build.
 */
export function imageDiskGib(assemblyDir: string): (image: string) => number | undefined {
  const byHash = new Map<string, number>();
  for (const file of fs.readdirSync(assemblyDir).filter((f) => f.endsWith('.assets.json'))) {
    const manifest = JSON.parse(fs.readFileSync(path.join(assemblyDir, file), 'utf8'));
    for (const [hash, asset] of Object.entries<any>(manifest.dockerImages ?? {})) {
      const dockerfile = String(asset.source?.dockerFile ?? 'Dockerfile');
      const gib = IMAGE_DISK_GIB[dockerfile];
      if (gib !== undefined) byHash.set(hash, gib);
    }
  }
  return (image: string) => {
    const tag = /:([0-9a-f]{64})$/.exec(image)?.[1];
    return tag === undefined ? undefined : byHash.get(tag);
  };
}
