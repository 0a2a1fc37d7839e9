import * as fs from 'fs';
import * as path from 'path';
import { App, CfnOutput, CfnResource, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { DockerImageAsset, Platform } from 'aws-cdk-lib/aws-ecr-assets';
import { EngineImage, EngineImageVariant } from '../../src/aws';
import { AcceleratedInstanceType, CpuArchitecture } from '../../src/catalog';

const REPO = path.resolve(__dirname, '..', '..');

interface DockerImageSource {
  readonly directory: string;
  readonly dockerFile?: string;
  readonly platform?: string;
  readonly dockerBuildArgs?: Record<string, string>;
}

/** Binds the image in a fresh stack, outputs its URI, synthesizes, and returns the pieces to inspect. */
function synth(image: EngineImage) {
  const app = new App();
  const stack = new Stack(app, 'Test');
  // A template needs one resource to pass CloudFormation's validation; this one costs nothing.
  new CfnResource(stack, 'Anchor', { type: 'AWS::CloudFormation::WaitConditionHandle' });
  const config = image.bind(stack);
  new CfnOutput(stack, 'ImageUri', { value: config.imageUri });
  const assembly = app.synth();
  const manifest = JSON.parse(fs.readFileSync(path.join(assembly.directory, 'Test.assets.json'), 'utf8'));
  const images = Object.values(manifest.dockerImages ?? {}) as Array<{ source: DockerImageSource }>;
  return { stack, config, template: Template.fromStack(stack), assembly, images };
}

describe('EngineImage.fromAsset', () => {
  test('builds images/engine/Dockerfile for linux/amd64 by default', () => {
    // WHEN
    const { config, images, template } = synth(EngineImage.fromAsset());

    // THEN the asset manifest names the Dockerfile, the platform and the version build arg
    expect(images).toHaveLength(1);
    expect(images[0].source).toMatchObject({ dockerFile: 'images/engine/Dockerfile', platform: 'linux/amd64' });
    const version = JSON.parse(fs.readFileSync(path.join(REPO, 'package.json'), 'utf8')).version;
    expect(images[0].source.dockerBuildArgs).toEqual({ DISAGG_VERSION: version });
    expect(config.asset).toBeInstanceOf(DockerImageAsset);
    // AND the URI points at the bootstrap container-assets repository
    template.hasOutput('ImageUri', {
      Value: { 'Fn::Sub': Match.stringLikeRegexp('cdk-hnb659fds-container-assets-.*:[0-9a-f]{64}$') },
    });
  });

  test.each([
    ['SLIM on linux/arm64', EngineImageVariant.SLIM, Platform.LINUX_ARM64, 'images/engine-slim/Dockerfile', 'linux/arm64'],
    ['FULL on linux/arm64', EngineImageVariant.FULL, Platform.LINUX_ARM64, 'images/engine/Dockerfile', 'linux/arm64'],
    ['NEURON on linux/amd64', EngineImageVariant.NEURON, Platform.LINUX_AMD64, 'images/engine-neuron/Dockerfile', 'linux/amd64'],
  ])('%s names its Dockerfile and platform', (_label, variant, platform, dockerFile, platformName) => {
    // WHEN
    const { images } = synth(EngineImage.fromAsset({ variant, platform }));

    // THEN
    expect(images.map((i) => [i.source.dockerFile, i.source.platform])).toEqual([[dockerFile, platformName]]);
  });

  test('stages only engine/ and images/ from the package root (per .dockerignore)', () => {
    // WHEN
    const { assembly, images } = synth(EngineImage.fromAsset({ variant: EngineImageVariant.SLIM }));

    // THEN the staged build context has what the Dockerfiles copy, and no node_modules or build outputs
    const staged = path.join(assembly.directory, images[0].source.directory);
    const top = fs.readdirSync(staged).sort();
    expect(top).toEqual(expect.arrayContaining(['engine', 'images']));
    expect(top.filter((e) => !['engine', 'images', '.dockerignore'].includes(e))).toEqual([]);
    expect(fs.existsSync(path.join(staged, 'images', 'engine-slim', 'Dockerfile'))).toBe(true);
    expect(fs.existsSync(path.join(staged, 'engine', 'CMakeLists.txt'))).toBe(true);
    expect(fs.existsSync(path.join(staged, 'engine', 'build'))).toBe(false);
  });

  test('reuses one asset per variant and platform within a scope', () => {
    // GIVEN
    const stack = new Stack(new App(), 'Test');
    const slim = EngineImage.fromAsset({ variant: EngineImageVariant.SLIM });

    // WHEN bound twice, plus another platform
    const first = slim.bind(stack);
    const second = EngineImage.fromAsset({ variant: EngineImageVariant.SLIM }).bind(stack);
    const arm = EngineImage.fromAsset({ variant: EngineImageVariant.SLIM, platform: Platform.LINUX_ARM64 }).bind(stack);

    // THEN
    expect(second.asset).toBe(first.asset);
    expect(arm.asset).not.toBe(first.asset);
    expect(stack.node.findAll().filter((c) => c instanceof DockerImageAsset)).toHaveLength(2);
  });

  test('passes extra build args and keeps DISAGG_VERSION unless overridden', () => {
    // WHEN
    const { images } = synth(EngineImage.fromAsset({
      variant: EngineImageVariant.SLIM,
      buildArgs: { DISAGG_REVISION: 'abc123', DISAGG_VERSION: '9.9.9' },
    }));

    // THEN
    expect(images[0].source.dockerBuildArgs).toEqual({ DISAGG_REVISION: 'abc123', DISAGG_VERSION: '9.9.9' });
  });

  test('rejects a platform the variant does not build, naming the fix', () => {
    expect(() => EngineImage.fromAsset({ variant: EngineImageVariant.NEURON, platform: Platform.LINUX_ARM64 }))
      .toThrow("'platform' (linux/arm64) is not built by EngineImageVariant.NEURON (linux/amd64); use Platform.LINUX_AMD64");
    expect(() => EngineImage.fromAsset({ platform: Platform.custom('linux/s390x') }))
      .toThrow(/'platform' \(linux\/s390x\) is not built by EngineImageVariant.FULL \(linux\/amd64, linux\/arm64\); use Platform.LINUX_AMD64 or Platform.LINUX_ARM64/);
  });
});

describe('EngineImageVariant', () => {
  test('each variant names a Dockerfile that exists in the package', () => {
    for (const variant of [EngineImageVariant.FULL, EngineImageVariant.SLIM, EngineImageVariant.NEURON]) {
      expect(fs.existsSync(path.join(REPO, variant.dockerfile))).toBe(true);
    }
    expect(EngineImageVariant.NEURON.architectures).toEqual([CpuArchitecture.X86_64]);
    expect(EngineImageVariant.FULL.platforms).toEqual(['linux/amd64', 'linux/arm64']);
  });
});

describe('EngineImage.platformFor', () => {
  test('is linux/arm64 for p6e-gb200 (Grace) and linux/amd64 for x86 instances', () => {
    expect(EngineImage.platformFor(AcceleratedInstanceType.P6E_GB200_36XLARGE).platform).toBe('linux/arm64');
    expect(EngineImage.platformFor(AcceleratedInstanceType.P5EN_48XLARGE).platform).toBe('linux/amd64');
    expect(EngineImage.platformFor(AcceleratedInstanceType.TRN2_48XLARGE).platform).toBe('linux/amd64');
  });
});

describe('EngineImage.fromRegistry', () => {
  test('uses the URI as given, with no asset', () => {
    // GIVEN
    const uri = '123456789012.dkr.ecr.us-east-1.amazonaws.com/disagg-engine:0.1.0';

    // WHEN
    const { config, images, template, stack } = synth(EngineImage.fromRegistry(uri));

    // THEN
    expect(config).toEqual({ imageUri: uri });
    expect(images).toEqual([]);
    template.hasOutput('ImageUri', { Value: uri });
    Annotations.fromStack(stack).hasNoWarning('*', Match.anyValue());
  });

  test.each([
    'disagg/engine',
    'disagg/engine:latest',
    'localhost:5000/disagg-engine',
  ])('warns when %s is not pinned', (uri) => {
    // WHEN
    const { stack } = synth(EngineImage.fromRegistry(uri));

    // THEN
    Annotations.fromStack(stack).hasWarning('/Test', Match.stringLikeRegexp(`Engine image '${uri}' has no version tag or digest`));
  });

  test('accepts a digest without warning', () => {
    const { stack } = synth(EngineImage.fromRegistry(`localhost:5000/disagg-engine@sha256:${'0'.repeat(64)}`));
    Annotations.fromStack(stack).hasNoWarning('*', Match.anyValue());
  });

  test('rejects an empty URI', () => {
    expect(() => EngineImage.fromRegistry(' ')).toThrow(/'imageUri' is empty/);
  });
});
