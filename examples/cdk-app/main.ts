import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { InferenceStack } from './inference-stack';

const app = new App();
new InferenceStack(app, 'DisaggInference');
// Every synth runs the AwsSolutions rules. The library acknowledges its reviewed findings on the resources
// they concern, with their reasons, so this stack starts with none: anything reported here is new.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
