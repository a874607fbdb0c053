"""Text utilities the profiler, the corpus step and the bench-runner share.

One parser, one set of rules, so a record means the same thing in every step:
a corpus record's token counts and content class are the ones its traffic line
contributed to the profile, and the bench renders prompts with the same chat
template the corpus step render-checked.

- `forms`: detect a traffic line's form and normalize it (`TrafficRecord`);
- `content`: the content class of one record;
- `tokens`: token counts from a local tokenizer folder, or the documented estimate;
- `redact`: secrets and personal data into typed placeholders;
- `chat_template`: load a tokenizer folder's chat template and render with it;
- `shapes`: the bundled named workload shapes;
- `errors`: what these raise (permanent failures: `StepFailed`).
"""
