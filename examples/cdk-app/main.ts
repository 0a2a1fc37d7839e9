import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { InferenceStack } from './inference-stack';

const app = new App();
new InferenceStack(app, 'DisaggInference');
// Every synth runs the AwsSolutions rules; reviewed findings are suppressed with reasons in the stack.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
