"""What builds on the components: the registry, validated configs, the pipeline, the archive,
fine-tuning and the model API. Nothing below this folder imports it."""
